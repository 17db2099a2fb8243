import { afterEach, beforeEach, expect } from '@jest/globals';
import pg from 'pg';
import { openDatabase, type Database, type Db } from '../../cloud/src/storage/database.ts';
import { testDatabase, type TestDatabase } from './databases.ts';
import { eventually } from './eventually.ts';

/**
 * Lock-order tests on PostgreSQL: a writer must take the rows it writes in key order, so that while
 * it waits for one row it holds none with a higher key (another writer that took that one first
 * would then wait for it: a deadlock). These helpers hold a row, see a writer wait, and probe what
 * it holds meanwhile.
 */
export const AT = Date.UTC(2026, 10, 1) * 1000;

export interface RowLocks {
  /** Connections with index scans off, so plain reads and UPDATE ... FROM meet rows in heap order. */
  pool: pg.Pool;
  /** Holds `SELECT 1 FROM <table> WHERE <column> = $1 FOR UPDATE` in an open transaction. */
  hold(table: string, column: string, key: unknown): Promise<pg.PoolClient>;
  /** Resolves once exactly one connection of `pool` waits for a lock. */
  waiting(): Promise<void>;
  /** Whether `sql` (a `... FOR UPDATE NOWAIT` with `$1`) gets its lock at once. */
  lockable(sql: string, key: unknown): Promise<boolean>;
  /** Rolls back what is held and closes the pool. */
  close(): Promise<void>;
}

export function rowLocks(target: TestDatabase, name: string): RowLocks {
  const applicationName = `${name}-${target.schema}`;
  const pool = new pg.Pool({
    connectionString: target.url,
    application_name: applicationName,
    options: `-c search_path=${target.schema} -c enable_indexscan=off -c enable_bitmapscan=off`,
  });
  const clients: pg.PoolClient[] = [];
  const begin = async () => {
    const client = await pool.connect();
    clients.push(client);
    await client.query('BEGIN');
    return client;
  };
  return {
    pool,
    hold: async (table, column, key) => {
      const client = await begin();
      await client.query(`SELECT 1 FROM ${table} WHERE ${column} = $1 FOR UPDATE`, [key]);
      return client;
    },
    waiting: async () => {
      await eventually(async () => {
        const { rows } = await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
          [applicationName],
        );
        return rows[0]!.n === 1;
      }, 'the writer to wait for the row lock');
    },
    lockable: async (sql, key) => {
      const probe = await begin();
      try {
        await probe.query(sql, [key]);
        return true;
      } catch {
        return false;
      } finally {
        await probe.query('ROLLBACK');
      }
    },
    close: async () => {
      for (const c of clients.splice(0)) {
        await c.query('ROLLBACK').catch(() => undefined);
        c.release();
      }
      await pool.end();
    },
  };
}

/** Account `acc_1`, its site `sit_1`, and devices with these ids on it. */
export async function insertDevices(db: Db, ids: string[]): Promise<void> {
  await db.insertInto('accounts').values({ id: 'acc_1', name: 'A', created_at: AT }).execute();
  await db
    .insertInto('sites')
    .values({
      id: 'sit_1',
      account_id: 'acc_1',
      name: 'S',
      vertical: 'generic',
      timezone: 'UTC',
      created_at: AT,
      deleted_at: null,
    })
    .execute();
  await db
    .insertInto('devices')
    .values(
      ids.map((id) => ({
        id,
        account_id: 'acc_1',
        site_id: 'sit_1',
        local_id: id,
        name: id,
        notes: '',
        model: 'http-generic',
        fw_version: null,
        token_hash: null,
        token_issued_at: AT,
        last_seen_at: null,
        online: 0,
        created_at: AT,
        deleted_at: null,
      })),
    )
    .execute();
}

/** Checks a heap-order read of `table` meets the keys in `order` (the writer's wrong order). */
export async function expectHeapOrder(locks: RowLocks, table: string, column: string, order: unknown[]) {
  const { rows } = await locks.pool.query(`SELECT ${column} AS k FROM ${table}`);
  expect(rows.map((r: { k: unknown }) => r.k)).toEqual(order);
}

/** What `lockedDatabaseEachTest` gives each test: its database, opened by the service, and `rowLocks` on it. */
export interface LockedDatabase {
  target: TestDatabase;
  database: Database;
  locks: RowLocks;
}

/**
 * Registers, in the calling `describe`, a fresh PostgreSQL database (a schema of its own) for each
 * test, opened as the service opens it, with `rowLocks` named `name` on it; all closed after the test.
 */
export function lockedDatabaseEachTest(name: string): LockedDatabase {
  const each = {} as LockedDatabase;
  beforeEach(async () => {
    each.target = testDatabase('postgres');
    each.database = await openDatabase(each.target.url, { schema: each.target.schema });
    each.locks = rowLocks(each.target, name);
  });
  afterEach(async () => {
    await each.locks?.close();
    await each.database?.close();
    await each.target?.dispose();
  });
  return each;
}

/**
 * Holds ingest's writes on PostgreSQL until the answer is called: a lock on the ingest journal, which
 * every ingest write inserts into, taken by a connection of the test's own.
 */
export async function holdIngestWrites(target: TestDatabase): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: target.url, options: `-c search_path=${target.schema}` });
  await client.connect();
  await client.query('BEGIN');
  await client.query('LOCK TABLE ingest_journal IN EXCLUSIVE MODE');
  return async () => {
    await client.query('ROLLBACK');
    await client.end();
  };
}

/** A transaction of the test's own on a test database, holding what its statement locked. */
export interface Holder {
  /** Resolves once `n` sessions wait for this transaction, directly or behind one that does. */
  waitingBehind(n: number, what: string): Promise<void>;
  /** Commits, letting the waiting sessions go. */
  commit(): Promise<void>;
  /** Ends the connection (rolling back what was not committed). */
  end(): Promise<void>;
}

/** Runs `sql` in an open transaction on `target` (PostgreSQL), held until `commit`. */
export async function holdInTransaction(
  target: TestDatabase,
  sql: string,
  params: unknown[],
): Promise<Holder> {
  const client = new pg.Client({ connectionString: target.url, options: `-c search_path=${target.schema}` });
  await client.connect();
  await client.query('BEGIN');
  await client.query(sql, params);
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const pid = rows[0]!.pid;
  return {
    waitingBehind: async (n, what) => {
      await eventually(async () => {
        const waiting = await client.query<{ n: number }>(
          `WITH RECURSIVE w AS (
             SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))
             UNION SELECT a.pid FROM pg_stat_activity a JOIN w ON w.pid = ANY(pg_blocking_pids(a.pid))
           ) SELECT count(*)::int AS n FROM w`,
          [pid],
        );
        return waiting.rows[0]!.n === n;
      }, what);
    },
    commit: async () => void (await client.query('COMMIT')),
    end: () => client.end(),
  };
}
