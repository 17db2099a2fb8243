/** The gateway's receive time in microseconds, with sub-millisecond resolution. */
export interface Clock {
  nowMicros(): number;
}

/** How far the wall clock may move from the monotonic one before the clock follows it. */
const STEP_MS = 50;

/**
 * The wall clock (`Date.now()`) with the resolution of the monotonic one (`performance.now()`).
 * A Raspberry Pi has no battery clock: it boots with the time it last saved (or 1970) and NTP steps
 * it once the network is up, often after the gateway has started. The monotonic clock never sees
 * such a step, so the offset between the two is taken again whenever they part by more than
 * STEP_MS: readings are stamped with the corrected time from then on, not for the rest of the run
 * with the time the Pi booted with.
 */
export function wallClock(
  wall: () => number = Date.now,
  monotonic: () => number = () => performance.now(),
): Clock {
  let offset = wall() - monotonic();
  return {
    nowMicros: () => {
      const mono = monotonic();
      const ms = wall();
      if (Math.abs(ms - (offset + mono)) > STEP_MS) offset = ms - mono;
      return Math.floor((offset + mono) * 1000);
    },
  };
}

export const systemClock: Clock = wallClock();
