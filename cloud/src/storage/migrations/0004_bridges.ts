import type { Migration } from './migration.ts';

/**
 * MQTT bridges: one client certificate each, identified by its SHA-256 fingerprint (and serial), so
 * that deleting a bridge revokes exactly that certificate and an account may have one per site.
 */
export const bridges: Migration = {
  name: '0004_bridges',
  statements: () => [
    `CREATE TABLE bridges (
       id TEXT PRIMARY KEY,
       account_id TEXT NOT NULL REFERENCES accounts(id),
       site_id TEXT NOT NULL REFERENCES sites(id),
       name TEXT NOT NULL,
       cert_serial TEXT NOT NULL UNIQUE,
       cert_fingerprint TEXT NOT NULL UNIQUE,
       expires_at BIGINT NOT NULL,
       created_at BIGINT NOT NULL,
       last_seen_at BIGINT,
       revoked_at BIGINT)`,
    `CREATE INDEX bridges_account ON bridges (account_id, created_at)`,
  ],
};
