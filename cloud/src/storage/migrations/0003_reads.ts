import type { Migration } from './migration.ts';

/**
 * Measurement reads (docs/design/reads.md): rollups maintained at ingest, and the history of device moves.
 *
 * `measurement_rollups` holds per-hour and per-day aggregates of each channel (`res` is the
 * bucket width in seconds: 3600, 86400). On PostgreSQL pages keep 30% free so the upsert of a
 * current bucket can stay a HOT update (no new index entry). Its key starts with the channel group like
 * `measurements` (storage/layout.ts): the current buckets of the 16 channels of a group sit side by
 * side, so one ingest commit dirties about one page per group and level, not one per channel.
 * `first_ts`/`last_ts` are kept so late data can replace the first or last value of a bucket.
 *
 * `device_moves` records each move (docs/api/resources.md: `ts < effective_at` belongs to the old
 * site). `applied_at` is set once `devices.site_id` shows the new site (at once for a past
 * `effective_at`, by a job at `effective_at` otherwise).
 */
/**
 * One level's rollups from the raw rows: counts, sums and extremes by GROUP BY, first/last values by
 * the row at the bucket's min/max ts. The bucket start is a floor division written with `%`, exact
 * for negative times too on both databases (their `%` takes the sign of the dividend).
 */
function backfill(res: number): string {
  // The rollup group is written out (groups of 16, storage/layout.ts); the raw rows' own `grp` is
  // whatever their layout was when this runs (0006 regroups them later).
  const w = res * 1_000_000;
  const bucket = `(ts - (((ts % ${w}) + ${w}) % ${w}))`;
  const valueAt = (col: string) =>
    `(SELECT m.value FROM measurements m WHERE m.grp = g.grp AND m.ts = g.${col} AND m.sensor_seq = g.sensor_seq)`;
  return `INSERT INTO measurement_rollups
      (grp, res, bucket, sensor_seq, n, total, lo, hi, first_ts, first_value, last_ts, last_value)
    SELECT g.sensor_seq >> 4, ${res}, g.bucket, g.sensor_seq, g.n, g.total, g.lo, g.hi,
      g.first_ts, ${valueAt('first_ts')}, g.last_ts, ${valueAt('last_ts')}
    FROM (SELECT grp, sensor_seq, ${bucket} AS bucket, count(*) AS n, sum(value) AS total, min(value) AS lo,
            max(value) AS hi, min(ts) AS first_ts, max(ts) AS last_ts
          FROM measurements GROUP BY grp, sensor_seq, ${bucket}) g`;
}

export const reads: Migration = {
  name: '0003_reads',
  statements: (d) => [
    `CREATE TABLE measurement_rollups (
       grp BIGINT NOT NULL,
       res INTEGER NOT NULL,
       bucket BIGINT NOT NULL,
       sensor_seq BIGINT NOT NULL,
       n BIGINT NOT NULL,
       total DOUBLE PRECISION NOT NULL,
       lo DOUBLE PRECISION NOT NULL,
       hi DOUBLE PRECISION NOT NULL,
       first_ts BIGINT NOT NULL,
       first_value DOUBLE PRECISION NOT NULL,
       last_ts BIGINT NOT NULL,
       last_value DOUBLE PRECISION NOT NULL,
       PRIMARY KEY (grp, res, bucket, sensor_seq))${d.dialect === 'sqlite' ? ' WITHOUT ROWID' : ' WITH (fillfactor = 70)'}`,
    // Rollups of the measurements stored before this migration (none on a new install).
    ...[3600, 86400].map((res) => backfill(res)),
    `CREATE TABLE device_moves (
       id TEXT PRIMARY KEY,
       account_id TEXT NOT NULL REFERENCES accounts(id),
       device_id TEXT NOT NULL REFERENCES devices(id),
       from_site_id TEXT NOT NULL REFERENCES sites(id),
       to_site_id TEXT NOT NULL REFERENCES sites(id),
       effective_at BIGINT NOT NULL,
       applied_at BIGINT,
       created_by TEXT NOT NULL,
       created_at BIGINT NOT NULL,
       UNIQUE (device_id, effective_at))`,
    `CREATE INDEX device_moves_pending ON device_moves (to_site_id) WHERE applied_at IS NULL`,
  ],
};
