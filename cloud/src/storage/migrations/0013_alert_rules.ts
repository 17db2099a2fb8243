import type { Migration } from './migration.ts';

/**
 * Alert rules (docs/api/alert-rules.md, docs/design/alert-rules.md).
 * - `alert_rules`: the rule as it is now (soft-deleted, so its events keep naming it);
 *   `alert_rule_versions`: every version from when it was in force, so late data is judged by the
 *   rule of its own time.
 * - `alert_marks`: channels with measurements the alert engine has not yet seen, written by the
 *   rule engine's evaluation in the transaction that clears the sensor's own marker (the oldest
 *   time, and a generation so a mark written during an alert evaluation survives it).
 * - `alert_trackers`: per (rule, channel) the evaluator's state at the newest folded measurement and
 *   earlier checkpoints (JSON), and when the channel is due without new data.
 * - `alert_events`: the alarm events of alert rules, unique per (rule, channel, version, condition,
 *   started_at); the events endpoints read them together with `alarm_events`. `notify_n` counts
 *   the escalation notifications sent (each job advances it once).
 */
export const alertRules: Migration = {
  name: '0013_alert_rules',
  statements: () => [
    `CREATE TABLE alert_rules (
       id TEXT PRIMARY KEY,
       account_id TEXT NOT NULL REFERENCES accounts(id),
       name TEXT NOT NULL,
       enabled SMALLINT NOT NULL,
       site_id TEXT,
       kind TEXT,
       channel_ids TEXT,
       conditions TEXT NOT NULL,
       schedule TEXT,
       notify TEXT NOT NULL,
       created_by TEXT NOT NULL,
       created_at BIGINT NOT NULL,
       updated_at BIGINT NOT NULL,
       deleted_at BIGINT)`,
    `CREATE INDEX alert_rules_account ON alert_rules (account_id, created_at)`,
    `CREATE TABLE alert_rule_versions (
       rule_id TEXT NOT NULL,
       valid_from BIGINT NOT NULL,
       enabled SMALLINT NOT NULL,
       site_id TEXT,
       kind TEXT,
       channel_ids TEXT,
       conditions TEXT NOT NULL,
       schedule TEXT,
       PRIMARY KEY (rule_id, valid_from))`,
    `CREATE TABLE alert_marks (
       sensor_seq BIGINT PRIMARY KEY,
       from_ts BIGINT NOT NULL,
       gen BIGINT NOT NULL)`,
    `CREATE TABLE alert_trackers (
       rule_id TEXT NOT NULL,
       sensor_seq BIGINT NOT NULL,
       state TEXT,
       due_at BIGINT,
       updated_at BIGINT NOT NULL,
       PRIMARY KEY (rule_id, sensor_seq))`,
    `CREATE INDEX alert_trackers_channel ON alert_trackers (sensor_seq)`,
    `CREATE INDEX alert_trackers_due ON alert_trackers (due_at) WHERE due_at IS NOT NULL`,
    `CREATE TABLE alert_events (
       id TEXT PRIMARY KEY,
       account_id TEXT NOT NULL REFERENCES accounts(id),
       rule_id TEXT NOT NULL,
       version_from BIGINT NOT NULL,
       cond INTEGER NOT NULL,
       condition TEXT NOT NULL,
       severity TEXT NOT NULL,
       site_id TEXT NOT NULL,
       device_id TEXT NOT NULL,
       sensor_id TEXT NOT NULL,
       channel_id TEXT NOT NULL,
       sensor_seq BIGINT NOT NULL,
       kind TEXT NOT NULL,
       started_at BIGINT NOT NULL,
       alarm_at BIGINT NOT NULL,
       ended_at BIGINT,
       peak_value DOUBLE PRECISION,
       silenced SMALLINT NOT NULL,
       acknowledged_at BIGINT,
       acknowledged_by TEXT,
       ack_note TEXT,
       withdrawn_at BIGINT,
       notified_open_at BIGINT,
       notified_resolved_at BIGINT,
       notify_n INTEGER NOT NULL,
       created_at BIGINT NOT NULL,
       updated_at BIGINT NOT NULL,
       UNIQUE (rule_id, sensor_seq, version_from, cond, started_at))`,
    `CREATE INDEX alert_events_account ON alert_events (account_id, started_at)`,
    `CREATE INDEX alert_events_channel ON alert_events (sensor_seq, started_at)`,
  ],
};
