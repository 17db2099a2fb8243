/**
 * The one source of "now" in the cloud, injected so tests can move time (grace periods, code expiry,
 * session expiry, rate-limit windows).
 */
export interface Clock {
  /** Microseconds since the Unix epoch. */
  nowMicros(): number;
}

/** Wall time with microsecond resolution: Date.now() anchors it, the monotonic timer refines it. */
export class SystemClock implements Clock {
  private readonly originMicros = Date.now() * 1000 - Math.round(performance.now() * 1000);
  private last = 0;

  nowMicros(): number {
    const now = this.originMicros + Math.round(performance.now() * 1000);
    // Never hand out the same microsecond twice: server-stamped readings of one device must not collide.
    this.last = now > this.last ? now : this.last + 1;
    return this.last;
  }
}

/** A clock that only moves when told to. */
export class ManualClock implements Clock {
  constructor(private micros: number) {}

  nowMicros(): number {
    return this.micros;
  }

  set(micros: number): void {
    this.micros = micros;
  }

  advanceMs(ms: number): void {
    this.micros += ms * 1000;
  }
}
