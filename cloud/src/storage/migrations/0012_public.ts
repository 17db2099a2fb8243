import type { Migration } from './migration.ts';

/**
 * The public community API (docs/api/public.md). `public_devices` holds what an owner chose to
 * publish about a device (its nickname, place and position, and whether it is public at all);
 * `public_hidden_sensors` the sensors an operator took off the map; `public_flags` the reports
 * anyone may send about a sensor, until an operator resolves them. `public_epoch` is one row whose
 * counter grows with every change of what is public, in the transaction of the change: each process
 * compares it with the counter its cached answers were made at, so a device made private (or
 * deleted, or hidden) disappears from every replica's next answer.
 */
export const publicApi: Migration = {
  name: '0012_public',
  statements: () => [
    `CREATE TABLE public_devices (
       device_id TEXT PRIMARY KEY REFERENCES devices(id),
       account_id TEXT NOT NULL REFERENCES accounts(id),
       enabled INTEGER NOT NULL,
       nickname TEXT,
       location_name TEXT,
       organisation TEXT,
       lat DOUBLE PRECISION,
       lon DOUBLE PRECISION,
       updated_at BIGINT NOT NULL)`,
    `CREATE INDEX public_devices_enabled ON public_devices (enabled)`,
    `CREATE TABLE public_hidden_sensors (
       sensor_id TEXT PRIMARY KEY,
       hidden_at BIGINT NOT NULL)`,
    `CREATE TABLE public_flags (
       id TEXT PRIMARY KEY,
       sensor_id TEXT NOT NULL,
       reason TEXT NOT NULL,
       reporter TEXT NOT NULL,
       created_at BIGINT NOT NULL,
       resolved_at BIGINT,
       resolution TEXT)`,
    `CREATE INDEX public_flags_sensor ON public_flags (sensor_id, created_at)`,
    `CREATE INDEX public_flags_created ON public_flags (created_at)`,
    `CREATE TABLE public_epoch (id INTEGER PRIMARY KEY, epoch BIGINT NOT NULL)`,
    `INSERT INTO public_epoch (id, epoch) VALUES (1, 0)`,
  ],
};
