import type { Migration } from './migration.ts';

/**
 * What replicas on one database share beyond the tables they already had (docs/operations.md,
 * "Production layout").
 * - `pki_keys`: the MQTT bridge's service CA (`ca`) and TLS server certificate (`server`), key and
 *   certificate in PEM, made by the first process that needs them; every replica then serves with the
 *   same CA, so a bridge certificate issued through one is accepted by all. Unused when the operator
 *   configures the CA in files.
 * - `bridge_presence`: which process holds a live connection of which bridge, refreshed while it
 *   lasts (`seen_at`), so any replica answers `connected` and finds the bridges a downlink can reach.
 *   A row whose process died stops being refreshed and counts as gone.
 */
export const cluster: Migration = {
  name: '0015_cluster',
  statements: () => [
    `CREATE TABLE pki_keys (
       name TEXT PRIMARY KEY,
       cert_pem TEXT NOT NULL,
       key_pem TEXT NOT NULL,
       updated_at BIGINT NOT NULL)`,
    `CREATE TABLE bridge_presence (
       bridge_id TEXT NOT NULL,
       replica_id TEXT NOT NULL,
       seen_at BIGINT NOT NULL,
       PRIMARY KEY (bridge_id, replica_id))`,
  ],
};
