import type { Migration } from './index.ts';

/**
 * Measurement reads (issue 5): rollups maintained at ingest, and the history of device moves.
 *
 * `measurement_rollups` holds per-minute, per-hour and per-day aggregates of each channel
 * (`res` is the bucket width in seconds: 60, 3600, 86400). Its key starts with the channel group like
 * `measurements` (storage/layout.ts): the current buckets of the 16 channels of a group sit side by
 * side, so one ingest commit dirties about one page per group and level, not one per channel.
 * `first_ts`/`last_ts` are kept so late data can replace the first or last value of a bucket.
 *
 * `device_moves` records each move (decisions, "Devices": `ts < effective_at` belongs to the old
 * site). `applied_at` is set once `devices.site_id` shows the new site (at once for a past
 * `effective_at`, by a job at `effective_at` otherwise).
 */
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
       PRIMARY KEY (grp, res, bucket, sensor_seq))${d.dialect === 'sqlite' ? ' WITHOUT ROWID' : ''}`,
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
