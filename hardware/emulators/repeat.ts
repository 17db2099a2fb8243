/**
 * Runs an emulated device's report now and then every `intervalMs` until stopped. A failed round
 * (the gateway is down, a port vanished) is reported and the next round runs as usual: a real device
 * keeps trying too.
 */
export class Repeat {
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly round: () => Promise<void>,
    private readonly intervalMs: number,
    private readonly onError: (err: unknown) => void = (err) =>
      process.stderr.write(`emulator: round failed: ${err instanceof Error ? err.message : String(err)}\n`),
  ) {}

  get running(): boolean {
    return this.timer !== null;
  }

  start(): void {
    if (this.timer) return;
    const tick = () => {
      this.round()
        .catch(this.onError)
        .finally(() => {
          if (this.timer) this.timer = setTimeout(tick, this.intervalMs);
        });
    };
    this.timer = setTimeout(tick, 0);
  }

  /** Safe to call twice. */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
