import { MICROS_PER_HOUR } from '../../../shared/time.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { notFound } from '../errors.ts';
import { retentionCutoff } from '../retention/retention.ts';
import type { Db } from '../storage/database.ts';
import type { ChannelRow, MeasurementsRepository } from './measurements.repository.ts';
import {
  bucketStart,
  evaluate,
  mergeInto,
  pointAggregate,
  tile,
  type Aggregate,
  type AggFn,
} from './rollups.ts';

export interface Point {
  ts: number;
  value: number;
}

/** What to read: `[from, to)` raw (width null) or in buckets of `width` µs evaluated with `fn`. */
export interface SeriesQuery {
  from: number;
  to: number;
  width: number | null;
  fn: AggFn;
}

export interface SeriesPage {
  points: Point[];
  hasMore: boolean;
}

/** Raw rows per query when streaming (CSV, export): bounded memory however long the range. */
const RAW_CHUNK = 1_000;
/** Buckets per window when streaming aggregates. */
const BUCKET_CHUNK = 10_000;

/**
 * Measurement reads (docs/api/reads.md): raw points, or buckets aligned to UTC epoch
 * multiples and stamped with their start, `from` inclusive and `to` exclusive, empty buckets left out.
 * Aggregates are merged from rollups (`rollups.ts`), so a year at `1d` reads a few hundred rows.
 */
export class MeasurementsService {
  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      config: Config;
      measurements: MeasurementsRepository;
      /** Folds ingest's journal into the rollups, so aggregates include everything ingested (ingest.fold.ts). */
      catchUp?: () => Promise<void>;
    },
  ) {}

  /** Devices deleted before this are past retention: their channels are gone for reads. */
  private deletedAfter(): number {
    return retentionCutoff(this.deps.config, this.deps.clock.nowMicros());
  }

  /** A readable channel of the account, else 404 `channel_not_found` (foreign ids alike). */
  async channel(accountId: string, channelId: string): Promise<ChannelRow> {
    const { db, measurements } = this.deps;
    const found = await measurements.findChannel(db, accountId, channelId, this.deletedAfter());
    if (!found) throw notFound('channel');
    return found;
  }

  /** Readable channels in the order asked; any unknown or foreign id is 404 `channel_not_found`. */
  async channels(accountId: string, channelIds: string[]): Promise<ChannelRow[]> {
    const { db, measurements } = this.deps;
    const rows = await measurements.findChannels(db, accountId, channelIds, this.deletedAfter());
    const byId = new Map(rows.map((r) => [r.channel_id, r]));
    return channelIds.map((id) => {
      const row = byId.get(id);
      if (!row) throw notFound('channel');
      return row;
    });
  }

  /**
   * One page of at most `limit` points starting at `start` (the range's `from`, or just after the
   * previous page's last point); `hasMore` says whether another point follows.
   */
  async page(seq: number, q: SeriesQuery, start: number, limit: number): Promise<SeriesPage> {
    const points: Point[] = [];
    if (q.width === null) {
      points.push(...(await this.deps.measurements.raw(this.deps.db, seq, start, q.to, limit + 1)));
    } else {
      for await (const chunk of this.aggregated(seq, { ...q, from: start }, limit + 1)) {
        points.push(...chunk);
        if (points.length > limit) break;
      }
    }
    const hasMore = points.length > limit;
    return { points: hasMore ? points.slice(0, limit) : points, hasMore };
  }

  /** Every point of the range, oldest first, in chunks of bounded size (CSV and export). */
  async *stream(seq: number, q: SeriesQuery): AsyncGenerator<Point[]> {
    if (q.width !== null) {
      yield* this.aggregated(seq, q, BUCKET_CHUNK);
      return;
    }
    let from = q.from;
    for (;;) {
      const rows = await this.deps.measurements.raw(this.deps.db, seq, from, q.to, RAW_CHUNK);
      if (rows.length > 0) yield rows;
      if (rows.length < RAW_CHUNK) return;
      from = rows[rows.length - 1]!.ts + 1;
    }
  }

  /**
   * Buckets of `q.width` over `[q.from, q.to)`, window by window (`chunk` buckets each). Before each
   * window it seeks the next minute holding data, so long empty stretches cost one query.
   */
  private async *aggregated(seq: number, q: SeriesQuery, chunk: number): AsyncGenerator<Point[]> {
    const { db, measurements } = this.deps;
    await this.deps.catchUp?.();
    const width = q.width!;
    let pos = q.from;
    while (pos < q.to) {
      const next = await measurements.nextDataHour(db, seq, bucketStart(pos, MICROS_PER_HOUR), q.to);
      if (next === null) return;
      const windowStart = Math.max(pos, bucketStart(next, width));
      const windowEnd = Math.min(q.to, bucketStart(windowStart, width) + chunk * width);
      // Tiles of the agg's own level are whole answer buckets, answered by the query itself; the
      // finer tiles at the edges lie in other buckets and are merged here.
      const whole: Point[] = [];
      const buckets = new Map<number, Aggregate>();
      const add = (bucket: number, a: Aggregate) => {
        const found = buckets.get(bucket);
        if (found) mergeInto(found, a);
        else buckets.set(bucket, { ...a });
      };
      for (const t of tile(windowStart, windowEnd, width)) {
        if (t.source === 'raw') {
          const rows = await measurements.raw(db, seq, t.from, t.to, Number.MAX_SAFE_INTEGER);
          for (const r of rows) add(bucketStart(r.ts, width), pointAggregate(r.ts, r.value));
        } else if (t.source * 1_000_000 === width) {
          whole.push(...(await measurements.bucketValues(db, seq, t.source, t.from, t.to, q.fn)));
        } else {
          for (const r of await measurements.rollups(db, seq, t.source, t.from, t.to, q.fn))
            add(bucketStart(r.bucket, width), r);
        }
      }
      const edges = [...buckets.entries()].map(([bucket, a]) => ({ ts: bucket, value: evaluate(q.fn, a) }));
      const points = edges.length === 0 ? whole : [...whole, ...edges].sort((a, b) => a.ts - b.ts);
      if (points.length > 0) yield points;
      pos = windowEnd;
    }
  }
}
