import type { Migration } from './migration.ts';

/**
 * The ingest journal (`cloud/src/ingest/ingest.fold.ts`): each ingest group adds one row
 * with the points it wrote, in the same transaction as the raw rows; the fold merges journal rows
 * into the rollups, the channels' last values and the rule engine's marker, and deletes them. Until
 * this migration ingest kept those in its own transaction, so an upgraded database starts with an
 * empty journal and consistent derived state.
 */
export const ingestJournal: Migration = {
  name: '0005_ingest_journal',
  statements: (d) => [
    `CREATE TABLE ingest_journal (
       id ${d.autoIncrementKey},
       points ${d.dialect === 'sqlite' ? 'BLOB' : 'BYTEA'} NOT NULL,
       created_at BIGINT NOT NULL)`,
  ],
};
