import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { BUCKETS, MAX_POINTS, pickBucket, RANGES, toSeries } from '../../web/shared/series.ts';

const HOUR = 3600_000;

describe('pickBucket', () => {
  it('gives each fixed range a few hundred points', () => {
    expect(pickBucket(0, RANGES['24h'] * 1000)).toBe('5m'); // 288
    expect(pickBucket(0, RANGES['7d'] * 1000)).toBe('15m'); // 672
    expect(pickBucket(0, RANGES['30d'] * 1000)).toBe('1h'); // 720
    expect(pickBucket(0, 2 * HOUR)).toBe('1m');
    expect(pickBucket(0, 3 * 365 * 24 * HOUR)).toBe('1d');
  });

  it('never asks for more than MAX_POINTS buckets, and takes the narrowest that fits', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 700 * 24 * 3600 }), (seconds) => {
        const chosen = pickBucket(0, seconds * 1000);
        const index = BUCKETS.findIndex(([name]) => name === chosen);
        expect(seconds / BUCKETS[index]![1]).toBeLessThanOrEqual(MAX_POINTS);
        if (index > 0) expect(seconds / BUCKETS[index - 1]![1]).toBeGreaterThan(MAX_POINTS);
      }),
    );
  });
});

describe('toSeries', () => {
  const at = (minutes: number) => new Date(Date.UTC(2026, 0, 5) + minutes * 60_000).toISOString();
  const t0 = Date.UTC(2026, 0, 5) / 1000;

  it('turns points into uPlot columns in seconds', () => {
    expect(
      toSeries(
        [
          { ts: at(0), value: 3 },
          { ts: at(5), value: 4 },
        ],
        300,
      ),
    ).toEqual({ ts: [t0, t0 + 300], values: [3, 4] });
  });

  it('breaks the line with a null where the data stops for longer than the gap', () => {
    const points = [
      { ts: at(0), value: 3 },
      { ts: at(30), value: 4 },
      { ts: at(120), value: 5 },
    ];
    // Gap of 60 minutes (a sensor's no_data_min): 30 minutes apart joins, 90 minutes apart breaks.
    expect(toSeries(points, 300, 3600)).toEqual({
      ts: [t0, t0 + 1800, t0 + 2100, t0 + 7200],
      values: [3, 4, null, 5],
    });
    // Without a gap given, two buckets apart already breaks.
    expect(toSeries(points, 300).values).toEqual([3, null, 4, null, 5]);
  });
});
