import { MICROS_PER_DAY, MICROS_PER_HOUR, MICROS_PER_MINUTE } from '../../../shared/time.ts';
import { ROLLUP_GROUP_SHIFT } from '../storage/layout.ts';

/**
 * Rollups: per-hour and per-day aggregates of each channel (`measurement_rollups`), folded from
 * ingest's journal (`ingest/ingest.fold.ts`); readers catch the fold up first, so they never lag. A long aggregated read combines these instead
 * of scanning raw rows; an aggregate over any range is the merge of the rollups that tile its aligned
 * middle and of finer rollups or raw points at its edges (`tile`), so answers are exact.
 *
 * Buckets are aligned to UTC epoch multiples of their width (docs/api/reads.md): the
 * bucket of `ts` at width `w` starts at `floor(ts / w) * w`.
 */

/**
 * Rollup levels, coarsest first, as bucket widths in seconds (the `res` column). There is no
 * per-minute level: at the usual cadence (a reading a minute or less) it is as large as the raw data
 * and cost ingest as much as the raw insert itself (docs/design/reads.md); 1m to 15m buckets and the
 * sub-hour edges of a range are read from raw rows.
 */
export const ROLLUP_LEVELS = [86_400, 3_600] as const;
export type RollupRes = (typeof ROLLUP_LEVELS)[number];

export const AGG_WIDTHS = {
  '1m': MICROS_PER_MINUTE,
  '5m': 5 * MICROS_PER_MINUTE,
  '15m': 15 * MICROS_PER_MINUTE,
  '1h': MICROS_PER_HOUR,
  '6h': 6 * MICROS_PER_HOUR,
  '1d': MICROS_PER_DAY,
} as const;
export type Agg = keyof typeof AGG_WIDTHS;

export const AGG_FNS = ['mean', 'min', 'max', 'first', 'last', 'count', 'sum'] as const;
export type AggFn = (typeof AGG_FNS)[number];

/** The aggregate of some points: everything each `fn` needs, and mergeable with another. */
export interface Aggregate {
  n: number;
  total: number;
  lo: number;
  hi: number;
  firstTs: number;
  firstValue: number;
  lastTs: number;
  lastValue: number;
}

/** One rollup row's content, ready to be merged into the stored row (`IngestTx.upsertRollups`). */
export interface RollupDelta extends Aggregate {
  sensorSeq: number;
  res: RollupRes;
  /** Bucket start, microseconds. */
  bucket: number;
}

export function resMicros(res: RollupRes): number {
  return res * 1_000_000;
}

/** Start of the bucket of width `width` (µs) that holds `ts`; exact for negative times too. */
export function bucketStart(ts: number, width: number): number {
  return Math.floor(ts / width) * width;
}

export function pointAggregate(ts: number, value: number): Aggregate {
  return {
    n: 1,
    total: value,
    lo: value,
    hi: value,
    firstTs: ts,
    firstValue: value,
    lastTs: ts,
    lastValue: value,
  };
}

/** Merges `b` into `a` (mutating `a`). Points of one channel have distinct ts, so first/last are unique. */
export function mergeInto(a: Aggregate, b: Aggregate): void {
  a.n += b.n;
  a.total += b.total;
  if (b.lo < a.lo) a.lo = b.lo;
  if (b.hi > a.hi) a.hi = b.hi;
  if (b.firstTs < a.firstTs) {
    a.firstTs = b.firstTs;
    a.firstValue = b.firstValue;
  }
  if (b.lastTs > a.lastTs) {
    a.lastTs = b.lastTs;
    a.lastValue = b.lastValue;
  }
}

/** The rollup columns each fn needs: reads fetch only those (a narrower row is much cheaper to read). */
export const FN_COLUMNS = {
  mean: ['n', 'total'],
  sum: ['n', 'total'],
  count: ['n'],
  min: ['lo'],
  max: ['hi'],
  first: ['first_ts', 'first_value'],
  last: ['last_ts', 'last_value'],
} as const satisfies Record<AggFn, readonly string[]>;

/** The neutral aggregate: merging it changes nothing (fields a read did not fetch keep these). */
export function emptyAggregate(): Aggregate {
  return {
    n: 0,
    total: 0,
    lo: Infinity,
    hi: -Infinity,
    firstTs: Infinity,
    firstValue: NaN,
    lastTs: -Infinity,
    lastValue: NaN,
  };
}

export function evaluate(fn: AggFn, a: Aggregate): number {
  switch (fn) {
    case 'mean':
      return a.total / a.n;
    case 'min':
      return a.lo;
    case 'max':
      return a.hi;
    case 'first':
      return a.firstValue;
    case 'last':
      return a.lastValue;
    case 'count':
      return a.n;
    case 'sum':
      return a.total;
  }
}

/**
 * The rollup rows some written points add to, aggregated in memory first so each
 * (channel, level, bucket) is upserted once, in key order (grp, res, bucket, seq): the order of the
 * primary key, which keeps concurrent PostgreSQL writers from deadlocking.
 * Only points that were actually written may be passed (duplicates must not count twice).
 */
export function rollupDeltas(
  points: Iterable<{ sensorSeq: number; ts: number; value: number }>,
): RollupDelta[] {
  const flat: number[] = [];
  for (const p of points) flat.push(p.sensorSeq, p.ts, p.value);
  return rollupDeltasOf([Float64Array.from(flat)]);
}

/**
 * `rollupDeltas` over (seq, ts, value) triplets, the ingest journal's format (this runs for every
 * fold): hourly buckets first, with number keys only, then each day merged from its hours.
 */
export function rollupDeltasOf(batches: readonly Float64Array[]): RollupDelta[] {
  const finest = ROLLUP_LEVELS[ROLLUP_LEVELS.length - 1]!;
  const finestWidth = resMicros(finest);
  // channel → bucket start → delta
  const hours = new Map<number, Map<number, RollupDelta>>();
  const out: RollupDelta[] = [];
  for (const points of batches) {
    for (let i = 0; i + 2 < points.length; i += 3) {
      const seq = points[i]!;
      const ts = points[i + 1]!;
      const value = points[i + 2]!;
      const bucket = bucketStart(ts, finestWidth);
      let buckets = hours.get(seq);
      if (!buckets) hours.set(seq, (buckets = new Map<number, RollupDelta>()));
      const found = buckets.get(bucket);
      if (!found) {
        const delta: RollupDelta = { sensorSeq: seq, res: finest, bucket, ...pointAggregate(ts, value) };
        buckets.set(bucket, delta);
        out.push(delta);
        continue;
      }
      found.n += 1;
      found.total += value;
      if (value < found.lo) found.lo = value;
      if (value > found.hi) found.hi = value;
      if (ts < found.firstTs) {
        found.firstTs = ts;
        found.firstValue = value;
      }
      if (ts > found.lastTs) {
        found.lastTs = ts;
        found.lastValue = value;
      }
    }
  }
  // Coarser levels merge the finer deltas (each level's width divides the next one's).
  let finer = out.slice();
  for (let l = ROLLUP_LEVELS.length - 2; l >= 0; l--) {
    const res = ROLLUP_LEVELS[l]!;
    const width = resMicros(res);
    const coarse = new Map<number, Map<number, RollupDelta>>();
    const level: RollupDelta[] = [];
    for (const d of finer) {
      const bucket = bucketStart(d.bucket, width);
      let buckets = coarse.get(d.sensorSeq);
      if (!buckets) coarse.set(d.sensorSeq, (buckets = new Map<number, RollupDelta>()));
      const found = buckets.get(bucket);
      if (found) mergeInto(found, d);
      else {
        const delta: RollupDelta = { ...d, res, bucket };
        buckets.set(bucket, delta);
        level.push(delta);
      }
    }
    out.push(...level);
    finer = level;
  }
  return out.sort(
    (a, b) =>
      (a.sensorSeq >> ROLLUP_GROUP_SHIFT) - (b.sensorSeq >> ROLLUP_GROUP_SHIFT) ||
      a.res - b.res ||
      a.bucket - b.bucket ||
      a.sensorSeq - b.sensorSeq,
  );
}

/** A piece of a time range and where its data comes from: a rollup level, or raw points. */
export interface Tile {
  source: RollupRes | 'raw';
  from: number;
  to: number;
}

/**
 * Splits `[from, to)` into pieces each read from the coarsest source that covers it exactly: whole
 * days from daily rollups, whole hours at the edges from hourly ones, and the sub-hour edges from
 * raw points. Only levels no wider than the target bucket width
 * are used (a 5-minute bucket cannot be read from hourly rollups), and every level width divides
 * every wider aggregate width, so no tile straddles two target buckets.
 */
export function tile(from: number, to: number, aggWidth: number): Tile[] {
  const levels = ROLLUP_LEVELS.filter((res) => resMicros(res) <= aggWidth);
  const out: Tile[] = [];
  const go = (a: number, b: number, i: number): void => {
    if (a >= b) return;
    const res = levels[i];
    if (res === undefined) {
      out.push({ source: 'raw', from: a, to: b });
      return;
    }
    const w = resMicros(res);
    const start = Math.ceil(a / w) * w;
    const end = Math.floor(b / w) * w;
    if (start >= end) {
      go(a, b, i + 1);
      return;
    }
    go(a, start, i + 1);
    out.push({ source: res, from: start, to: end });
    go(end, b, i + 1);
  };
  go(from, to, 0);
  return out;
}
