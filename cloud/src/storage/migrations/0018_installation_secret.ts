import type { Migration } from './migration.ts';

/**
 * `installation_secrets`: random keys of this installation, made once by the migration and shared
 * by every replica through the database (and so kept by its backups). `flag_reporter` keys the
 * hash that public flags keep of a reporter's address (docs/api/public.md): an unkeyed hash of an
 * IPv4 address is undone by trying all four billion.
 */
export const installationSecret: Migration = {
  name: '0018_installation_secret',
  statements: ({ dialect }) => [
    `CREATE TABLE installation_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL)`,
    dialect === 'sqlite'
      ? `INSERT INTO installation_secrets (name, value) VALUES ('flag_reporter', lower(hex(randomblob(32))))`
      : `INSERT INTO installation_secrets (name, value)
         VALUES ('flag_reporter', replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''))`,
  ],
};
