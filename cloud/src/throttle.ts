/**
 * Runs work soon after it is asked for, at most once per `intervalMs`: at once when the last run
 * started that long ago or longer, otherwise when that much time has passed since; everything asked
 * for meanwhile shares that run. A quiet system answers at once, a busy one in batches (the ingest
 * fold, the rule engine's kicks). Real time, whatever the application's clock.
 */
export class Throttle {
  private timer: NodeJS.Timeout | null = null;
  private lastStart = -Infinity;

  constructor(
    private readonly intervalMs: number,
    private readonly run: () => void,
  ) {}

  /** Whether a run is asked for and not started yet. */
  get pending(): boolean {
    return this.timer !== null;
  }

  /** Asks for a run: at once after a quiet spell, otherwise `intervalMs` after the last one started. */
  request(): void {
    if (this.timer) return;
    const wait = Math.max(0, this.lastStart + this.intervalMs - performance.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      this.run();
    }, wait);
    this.timer.unref();
  }

  /** A run started (asked for here or not): the next one keeps `intervalMs` from now. */
  started(): void {
    this.lastStart = performance.now();
  }

  /** Drops the run asked for, if any. */
  cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
