import { sql } from 'kysely';
import type { Db } from '../storage/database.ts';
import { MEASUREMENT_GROUP_SHIFT, measurementGroup, rollupGroup, rollupGroupsOf } from '../storage/layout.ts';
import type { Tables } from '../storage/schema.ts';
import {
  emptyAggregate,
  FN_COLUMNS,
  ROLLUP_LEVELS,
  resMicros,
  type Aggregate,
  type AggFn,
  type RollupRes,
} from './rollups.ts';

/** Each fn as an expression over one rollup row (mean: REAL / INTEGER is REAL on both databases). */
const FN_VALUE: Record<AggFn, string> = {
  mean: 'total / n',
  sum: 'total',
  count: 'n',
  min: 'lo',
  max: 'hi',
  first: 'first_value',
  last: 'last_value',
};

/** A channel as reads see it: its integer key and what the export and views need. */
export interface ChannelRow {
  seq: number;
  id: string;
  channel_id: string;
  device_id: string;
  kind: string;
  label: string | null;
  unit: string;
  site_id: string;
  device_deleted_at: number | null;
}

export interface RawPoint {
  ts: number;
  value: number;
}

export interface RollupRow extends Aggregate {
  bucket: number;
}

/**
 * The SQL of measurement reads. A channel's rows are read by their key, group first
 * (storage/layout.ts), so every query here is an index range scan on both databases.
 */
export class MeasurementsRepository {
  /**
   * A channel of the account whose data is still kept: its device is live, or was deleted after
   * `deletedAfter` (docs/api/resources.md: a deleted device's channels stay readable until retention).
   */
  async findChannel(
    db: Db,
    accountId: string,
    channelId: string,
    deletedAfter: number,
  ): Promise<ChannelRow | undefined> {
    const rows = await this.channels(db, accountId, deletedAfter)
      .where('s.channel_id', '=', channelId)
      .execute();
    return rows[0];
  }

  async findChannels(
    db: Db,
    accountId: string,
    channelIds: string[],
    deletedAfter: number,
  ): Promise<ChannelRow[]> {
    if (channelIds.length === 0) return [];
    return this.channels(db, accountId, deletedAfter).where('s.channel_id', 'in', channelIds).execute();
  }

  /** Every readable channel of the account, in key order (the export walks them). */
  async listChannels(db: Db, accountId: string, deletedAfter: number): Promise<ChannelRow[]> {
    return this.channels(db, accountId, deletedAfter).orderBy('s.seq').execute();
  }

  private channels(db: Db, accountId: string, deletedAfter: number) {
    return db
      .selectFrom('sensors as s')
      .innerJoin('devices as d', 'd.id', 's.device_id')
      .select([
        's.seq',
        's.id',
        's.channel_id',
        's.device_id',
        's.kind',
        's.label',
        's.unit',
        'd.site_id',
        'd.deleted_at as device_deleted_at',
      ])
      .where('s.account_id', '=', accountId)
      .where((eb) => eb.or([eb('d.deleted_at', 'is', null), eb('d.deleted_at', '>', deletedAfter)]));
  }

  /** Raw points in `[from, to)`, oldest first, at most `limit`. */
  async raw(db: Db, seq: number, from: number, to: number, limit: number): Promise<RawPoint[]> {
    return db
      .selectFrom('measurements')
      .select(['ts', 'value'])
      .where('grp', '=', measurementGroup(seq))
      .where('sensor_seq', '=', seq)
      .where('ts', '>=', from)
      .where('ts', '<', to)
      .orderBy('ts')
      .limit(limit)
      .execute();
  }

  /**
   * Rollup rows of one level whose bucket starts in `[from, to)`, oldest first, with only the columns
   * `fn` needs (the others keep their neutral value).
   */
  async rollups(
    db: Db,
    seq: number,
    res: RollupRes,
    from: number,
    to: number,
    fn: AggFn,
  ): Promise<RollupRow[]> {
    const rows = await db
      .selectFrom('measurement_rollups')
      .select(['bucket', ...FN_COLUMNS[fn]])
      .where('grp', '=', rollupGroup(seq))
      .where('res', '=', res)
      .where('sensor_seq', '=', seq)
      .where('bucket', '>=', from)
      .where('bucket', '<', to)
      .orderBy('bucket')
      .execute();
    return rows.map((r: Partial<Tables['measurement_rollups']>) => {
      const a: RollupRow = { bucket: r.bucket!, ...emptyAggregate() };
      if (r.n !== undefined) a.n = r.n;
      if (r.total !== undefined) a.total = r.total;
      if (r.lo !== undefined) a.lo = r.lo;
      if (r.hi !== undefined) a.hi = r.hi;
      if (r.first_ts !== undefined) a.firstTs = r.first_ts;
      if (r.first_value !== undefined) a.firstValue = r.first_value;
      if (r.last_ts !== undefined) a.lastTs = r.last_ts;
      if (r.last_value !== undefined) a.lastValue = r.last_value;
      return a;
    });
  }

  /**
   * Rollup rows of one level that are whole answer buckets (the level's width is the agg width):
   * the answer is computed in the query, two columns per row, no merging.
   */
  async bucketValues(
    db: Db,
    seq: number,
    res: RollupRes,
    from: number,
    to: number,
    fn: AggFn,
  ): Promise<RawPoint[]> {
    return db
      .selectFrom('measurement_rollups')
      .select(['bucket as ts', sql<number>`${sql.raw(FN_VALUE[fn])}`.as('value')])
      .where('grp', '=', rollupGroup(seq))
      .where('res', '=', res)
      .where('sensor_seq', '=', seq)
      .where('bucket', '>=', from)
      .where('bucket', '<', to)
      .orderBy('bucket')
      .execute();
  }

  /**
   * The start of the first hour in `[fromHour, to)` that holds data: every written point has an
   * hourly rollup, so this finds the next data without scanning raw rows, and lets sparse ranges
   * skip their empty stretches.
   */
  async nextDataHour(db: Db, seq: number, fromHour: number, to: number): Promise<number | null> {
    const row = await db
      .selectFrom('measurement_rollups')
      .select('bucket')
      .where('grp', '=', rollupGroup(seq))
      .where('res', '=', 3600)
      .where('sensor_seq', '=', seq)
      .where('bucket', '>=', fromHour)
      .where('bucket', '<', to)
      .orderBy('bucket')
      .limit(1)
      .executeTakeFirst();
    return row?.bucket ?? null;
  }

  /** Deletes a group's raw rows and rollups older than `cutoff`; answers how many raw rows went. */
  async deleteBefore(db: Db, grp: number, cutoff: number): Promise<number> {
    const result = await db
      .deleteFrom('measurements')
      .where('grp', '=', grp)
      .where('ts', '<', cutoff)
      .executeTakeFirst();
    // A bucket goes when it lies wholly before the cutoff (the cutoff is day-aligned, so all do).
    const rollups = rollupGroupsOf(grp);
    for (const res of ROLLUP_LEVELS) {
      await db
        .deleteFrom('measurement_rollups')
        .where('grp', '>=', rollups[0])
        .where('grp', '<', rollups[1])
        .where('res', '=', res)
        .where('bucket', '<=', cutoff - resMicros(res))
        .execute();
    }
    return Number(result.numDeletedRows);
  }

  /** The channel groups that hold any data, for the retention job. */
  async groups(db: Db): Promise<number[]> {
    const rows = await db
      .selectFrom('sensors')
      .select(sql<number>`seq >> ${sql.lit(MEASUREMENT_GROUP_SHIFT)}`.as('grp'))
      .distinct()
      .execute();
    return rows.map((r) => Number(r.grp)).sort((a, b) => a - b);
  }
}
