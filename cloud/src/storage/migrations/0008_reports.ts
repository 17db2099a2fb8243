import type { Migration } from './migration.ts';

/**
 * Reports (docs/api/reports.md): one row per requested report, and its PDF in `report_files`, in
 * the database itself, so every replica serves it and a database backup holds it
 * (docs/operations.md, "Reports"). The file lives in a table of its own so that listing reports never
 * reads the bytes.
 */
export const reports: Migration = {
  name: '0008_reports',
  statements: (d) => [
    `CREATE TABLE reports (
       id TEXT PRIMARY KEY,
       account_id TEXT NOT NULL REFERENCES accounts(id),
       site_id TEXT NOT NULL REFERENCES sites(id),
       template TEXT NOT NULL,
       language TEXT NOT NULL,
       period_from BIGINT NOT NULL,
       period_to BIGINT NOT NULL,
       state TEXT NOT NULL,
       error TEXT,
       created_at BIGINT NOT NULL,
       ready_at BIGINT,
       size_bytes BIGINT,
       sha256 TEXT,
       created_by TEXT NOT NULL)`,
    `CREATE INDEX reports_account ON reports (account_id, created_at)`,
    `CREATE TABLE report_files (
       report_id TEXT PRIMARY KEY REFERENCES reports(id),
       content ${d.dialect === 'sqlite' ? 'BLOB' : 'BYTEA'} NOT NULL)`,
  ],
};
