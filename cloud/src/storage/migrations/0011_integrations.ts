import type { Migration } from './migration.ts';

/**
 * Inbound integrations (docs/api/integrations.md): a `whk_` token per integration, stored hashed,
 * naming the account and site its webhooks deliver to. `integration_uplinks` remembers each uplink
 * delivered (ChirpStack `deduplicationId`, The Things Stack `correlation_ids`) with the time it was
 * stored under, so a second delivery lands on the same (device, ts, channel) and is a no-op.
 * `integration_device_events` keeps the last event of each kind per device (joins, status, logs).
 */
export const integrations: Migration = {
  name: '0011_integrations',
  statements: () => [
    `CREATE TABLE integrations (
       id TEXT PRIMARY KEY,
       account_id TEXT NOT NULL REFERENCES accounts(id),
       site_id TEXT NOT NULL REFERENCES sites(id),
       kind TEXT NOT NULL,
       name TEXT NOT NULL,
       token_hash TEXT NOT NULL UNIQUE,
       created_by TEXT NOT NULL,
       created_at BIGINT NOT NULL,
       token_issued_at BIGINT NOT NULL,
       last_used_at BIGINT,
       deleted_at BIGINT)`,
    `CREATE INDEX integrations_account ON integrations (account_id, created_at)`,
    `CREATE TABLE integration_uplinks (
       integration_id TEXT NOT NULL,
       uplink_key TEXT NOT NULL,
       ts BIGINT NOT NULL,
       created_at BIGINT NOT NULL,
       PRIMARY KEY (integration_id, uplink_key))`,
    `CREATE INDEX integration_uplinks_created ON integration_uplinks (created_at)`,
    `CREATE TABLE integration_device_events (
       integration_id TEXT NOT NULL,
       dev_eui TEXT NOT NULL,
       event TEXT NOT NULL,
       at BIGINT NOT NULL,
       detail TEXT NOT NULL,
       PRIMARY KEY (integration_id, dev_eui, event))`,
  ],
};
