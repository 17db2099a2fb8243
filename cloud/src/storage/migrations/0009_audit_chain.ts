import type { Migration } from './migration.ts';

/**
 * The audit trail as a hash chain per account (cloud/src/audit/audit-chain.ts): each entry carries
 * its place in the account's chain (`seq`, from 1), the hash of the entry before it (`prev_hash`,
 * NULL for the first) and its own hash. `audit_chain_heads` holds each account's last link; appends
 * lock that row, so two transactions of one account chain one after the other.
 *
 * Entries written before this migration keep `seq`, `prev_hash` and `hash` NULL: they stay readable
 * in the audit list and the export, outside the chain, which starts at the account's first entry
 * written after it (hashing needs SHA-256, which SQLite's SQL does not have).
 */
export const auditChain: Migration = {
  name: '0009_audit_chain',
  statements: () => [
    `ALTER TABLE audit_log ADD COLUMN seq BIGINT`,
    `ALTER TABLE audit_log ADD COLUMN prev_hash TEXT`,
    `ALTER TABLE audit_log ADD COLUMN hash TEXT`,
    `CREATE UNIQUE INDEX audit_log_account_seq ON audit_log (account_id, seq)`,
    `CREATE TABLE audit_chain_heads (
       account_id TEXT PRIMARY KEY REFERENCES accounts(id),
       seq BIGINT NOT NULL,
       entry_id TEXT,
       hash TEXT)`,
  ],
};
