import type { Migration } from './migration.ts';

/**
 * The rule engine (docs/design/rules.md): alarm events, silence windows, the history of sensor rules, the
 * engine's per-channel tracker, and outbound webhooks with every delivery attempt.
 *
 * - `sensors.eval_from`/`eval_gen`: ingest lowers `eval_from` to the oldest measurement time it wrote
 *   for the channel and bumps `eval_gen`, in the same transaction as the data; the engine clears them
 *   only when `eval_gen` is unchanged. So a crash between commit and evaluation loses nothing.
 * - `alarm_events` is unique per (channel, kind, started_at): re-evaluating the same data never adds
 *   a second event (what makes recompute idempotent).
 * - `rule_versions` keeps every rule a sensor had, from when it was in force, so late data is judged
 *   by the rule of its own time and an event records the bounds in force.
 */
export const rules: Migration = {
  name: '0002_rules',
  statements: (d) => [
    `ALTER TABLE sensors ADD COLUMN eval_from BIGINT`,
    `ALTER TABLE sensors ADD COLUMN eval_gen BIGINT NOT NULL DEFAULT 0`,
    `CREATE INDEX sensors_eval_from ON sensors (eval_from) WHERE eval_from IS NOT NULL`,
    `CREATE TABLE rule_versions (
       sensor_seq BIGINT NOT NULL,
       valid_from BIGINT NOT NULL,
       ok_min DOUBLE PRECISION NOT NULL,
       ok_max DOUBLE PRECISION NOT NULL,
       grace_min INTEGER NOT NULL,
       rule_enabled SMALLINT NOT NULL,
       no_data_min INTEGER NOT NULL,
       PRIMARY KEY (sensor_seq, valid_from))`,
    `CREATE TABLE channel_trackers (
       sensor_seq BIGINT PRIMARY KEY,
       last_ts BIGINT,
       run_kind TEXT,
       run_start BIGINT,
       run_peak DOUBLE PRECISION,
       has_open SMALLINT NOT NULL,
       due_at BIGINT,
       updated_at BIGINT NOT NULL)`,
    `CREATE INDEX channel_trackers_due ON channel_trackers (due_at) WHERE due_at IS NOT NULL`,
    `CREATE TABLE alarm_events (
       id TEXT PRIMARY KEY,
       account_id TEXT NOT NULL REFERENCES accounts(id),
       site_id TEXT NOT NULL,
       device_id TEXT NOT NULL,
       sensor_id TEXT NOT NULL,
       channel_id TEXT NOT NULL,
       sensor_seq BIGINT NOT NULL,
       kind TEXT NOT NULL,
       started_at BIGINT NOT NULL,
       alarm_at BIGINT NOT NULL,
       ended_at BIGINT,
       ok_min DOUBLE PRECISION NOT NULL,
       ok_max DOUBLE PRECISION NOT NULL,
       peak_value DOUBLE PRECISION,
       silenced SMALLINT NOT NULL,
       acknowledged_at BIGINT,
       acknowledged_by TEXT,
       ack_note TEXT,
       withdrawn_at BIGINT,
       notified_open_at BIGINT,
       notified_resolved_at BIGINT,
       created_at BIGINT NOT NULL,
       updated_at BIGINT NOT NULL,
       UNIQUE (channel_id, kind, started_at))`,
    `CREATE INDEX alarm_events_account ON alarm_events (account_id, started_at)`,
    `CREATE INDEX alarm_events_channel ON alarm_events (sensor_seq, started_at)`,
    `CREATE INDEX alarm_events_open ON alarm_events (sensor_seq) WHERE ended_at IS NULL AND withdrawn_at IS NULL`,
    `CREATE TABLE silences (
       id TEXT PRIMARY KEY,
       account_id TEXT NOT NULL REFERENCES accounts(id),
       sensor_id TEXT NOT NULL,
       sensor_seq BIGINT NOT NULL,
       from_ts BIGINT NOT NULL,
       to_ts BIGINT NOT NULL,
       reason TEXT NOT NULL,
       created_by TEXT NOT NULL,
       created_at BIGINT NOT NULL,
       ended_at BIGINT,
       ended_by TEXT)`,
    `CREATE INDEX silences_sensor ON silences (sensor_seq, to_ts)`,
    `CREATE TABLE webhooks (
       id TEXT PRIMARY KEY,
       account_id TEXT NOT NULL REFERENCES accounts(id),
       url TEXT NOT NULL,
       events TEXT NOT NULL,
       secret TEXT NOT NULL,
       created_by TEXT NOT NULL,
       created_at BIGINT NOT NULL,
       deleted_at BIGINT)`,
    `CREATE INDEX webhooks_account ON webhooks (account_id, created_at)`,
    `CREATE TABLE webhook_deliveries (
       id TEXT PRIMARY KEY,
       account_id TEXT NOT NULL REFERENCES accounts(id),
       webhook_id TEXT NOT NULL REFERENCES webhooks(id),
       type TEXT NOT NULL,
       body TEXT NOT NULL,
       state TEXT NOT NULL,
       attempts INTEGER NOT NULL,
       created_at BIGINT NOT NULL,
       last_attempt_at BIGINT,
       next_attempt_at BIGINT,
       delivered_at BIGINT,
       last_status INTEGER,
       last_error TEXT)`,
    `CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, created_at)`,
    `CREATE TABLE webhook_attempts (
       id ${d.autoIncrementKey},
       delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(id),
       attempt INTEGER NOT NULL,
       at BIGINT NOT NULL,
       status INTEGER,
       error TEXT,
       duration_ms INTEGER NOT NULL)`,
    `CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, attempt)`,
  ],
};
