/** The gateway's receive time in microseconds, with sub-millisecond resolution (performance.now). */
export interface Clock {
  nowMicros(): number;
}

export const systemClock: Clock = {
  nowMicros: () => Math.floor((performance.timeOrigin + performance.now()) * 1000),
};
