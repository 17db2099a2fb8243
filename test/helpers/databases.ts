import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

/**
 * The databases every storage behaviour runs against: SQLite always, PostgreSQL when
 * TEST_DATABASE_URL is set (CI always sets it, and a test fails, never skips, when it is unreachable).
 */
export type DbKind = 'sqlite' | 'postgres';

export const DATABASES: DbKind[] = process.env.TEST_DATABASE_URL ? ['sqlite', 'postgres'] : ['sqlite'];

export interface TestDatabase {
  kind: DbKind;
  url: string;
  /** PostgreSQL schema that isolates this test; undefined on SQLite. */
  schema: string | undefined;
  dataDir: string;
  dispose(): Promise<void>;
}

export function tempDir(prefix = 'sm-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** A fresh, empty database of `kind` with its own data directory. */
export function testDatabase(kind: DbKind): TestDatabase {
  const dataDir = tempDir();
  if (kind === 'sqlite') {
    return {
      kind,
      url: `sqlite:${path.join(dataDir, 'cloud.db')}`,
      schema: undefined,
      dataDir,
      dispose: async () => fs.rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const url = process.env.TEST_DATABASE_URL!;
  const schema = `t_${randomBytes(6).toString('hex')}`;
  return {
    kind,
    url,
    schema,
    dataDir,
    dispose: async () => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      } finally {
        await client.end();
      }
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
