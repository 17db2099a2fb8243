import type { Migration } from './migration.ts';

/**
 * PostgreSQL stores the ingest journal's points as they are: a group's points (24 bytes each) are
 * float64s that do not compress, and trying to (TOAST's pglz, on every row over 2 KiB) was ~3 % of
 * PostgreSQL's CPU at 32 measurements per request. Changes the column's storage only; existing rows
 * stay as they are. SQLite never compresses.
 */
export const journalUncompressed: Migration = {
  name: '0007_journal_uncompressed',
  statements: (d) =>
    d.dialect === 'postgres' ? [`ALTER TABLE ingest_journal ALTER COLUMN points SET STORAGE EXTERNAL`] : [],
};
