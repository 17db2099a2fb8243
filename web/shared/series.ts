/**
 * The chart's data without the chart: which bucket width the measurement read API is asked for, and
 * its points as uPlot's columns. No DOM and no uPlot here, so it runs anywhere (and in unit tests).
 */

/** The fixed ranges every chart offers, in seconds. */
export const RANGES = { '24h': 86_400, '7d': 7 * 86_400, '30d': 30 * 86_400 } as const;
export type RangeName = keyof typeof RANGES;

/** The measurement read API's bucket widths (`agg`), in seconds, narrowest first. */
export const BUCKETS = [
  ['1m', 60],
  ['5m', 300],
  ['15m', 900],
  ['1h', 3600],
  ['6h', 21_600],
  ['1d', 86_400],
] as const;
export type Bucket = (typeof BUCKETS)[number][0];

/** At most this many buckets per chart: a few hundred points, as many as a wide chart shows apart. */
export const MAX_POINTS = 800;

/**
 * The narrowest bucket that keeps the range at or under `maxPoints` points: 24 h → 5m (288),
 * 7 d → 15m (672), 30 d → 1h (720). A range longer than 800 days gets daily buckets anyway.
 */
export function pickBucket(fromMs: number, toMs: number, maxPoints = MAX_POINTS): Bucket {
  const seconds = Math.max(0, toMs - fromMs) / 1000;
  for (const [name, width] of BUCKETS) if (seconds / width <= maxPoints) return name;
  return '1d';
}

export function bucketSeconds(bucket: Bucket): number {
  return BUCKETS.find(([name]) => name === bucket)![1];
}

/** Points as the read API answers them: `{ts: RFC 3339, value}`. */
export interface ApiPoint {
  ts: string;
  value: number;
}

/** uPlot's columns: times in seconds and values, with a null wherever the data stops for a while. */
export interface Series {
  ts: number[];
  values: (number | null)[];
}

/**
 * The points as chart columns. Where two neighbours lie further apart than `gapSeconds` (for a
 * sensor, its `no_data_min`: the silence the product calls "no data") and more than two buckets, a
 * null breaks the line instead of drawing a slope through a time nothing was measured.
 */
export function toSeries(points: readonly ApiPoint[], stepSeconds: number, gapSeconds = 0): Series {
  const ts: number[] = [];
  const values: (number | null)[] = [];
  const gap = Math.max(2 * stepSeconds, gapSeconds);
  let previous: number | null = null;
  for (const p of points) {
    const t = Date.parse(p.ts) / 1000;
    if (previous !== null && t - previous > gap) {
      ts.push(previous + stepSeconds);
      values.push(null);
    }
    ts.push(t);
    values.push(p.value);
    previous = t;
  }
  return { ts, values };
}
