import fs from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { advisoryKeyPer, advisoryXactLock, advisoryXactLockOfSchemaParam } from './advisory-locks.ts';
import { MIGRATIONS } from './migrations/index.ts';
import type { Dialect, DialectSql } from './migrations/migration.ts';
import type { Tables } from './schema.ts';
import { LocalNotifyChannel, PostgresNotifyChannel, type NotifyChannel } from './notify-channel.ts';

/**
 * One data layer over two databases. Everything that differs between SQLite and PostgreSQL lives in
 * this file: connection setup, migration locking, error-code predicates and DDL fragments.
 * Feature code never branches on the database.
 */
export type { Dialect };

export type Db = Kysely<Tables>;

export interface Database {
  readonly dialect: Dialect;
  readonly db: Db;
  /** The raw handle, for hot paths that use prepared statements directly (ingest). */
  readonly sqlite: BetterSqlite3.Database | null;
  readonly pool: pg.Pool | null;
  /** Messages between the processes on this database (LISTEN/NOTIFY, or one process's channel). */
  readonly notify: NotifyChannel;
  close(): Promise<void>;
}

// int8 (counts, microsecond times) as JS numbers: every value we store fits in 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

export interface OpenOptions {
  /** PostgreSQL schema to use (tests isolate themselves in one); created when missing. */
  schema?: string;
  /** Where failures of the notify channel's listener go (it reconnects by itself). */
  onNotifyError?: (err: unknown) => void;
}

export async function openDatabase(url: string, options: OpenOptions = {}): Promise<Database> {
  const database = url.startsWith('sqlite:')
    ? openSqlite(url.slice('sqlite:'.length), options)
    : await openPostgres(url, options);
  await migrate(database);
  return database;
}

/** Prepared statements kept per SQL text for Kysely (it prepares every query anew otherwise). */
const STATEMENT_CACHE_SIZE = 500;

/**
 * The better-sqlite3 handle as Kysely sees it, with prepared statements reused: preparing costs
 * more than running most of our queries (the rule engine runs the same few thousands of times a
 * minute). A statement still being iterated (a stream) is busy, so a second use gets a fresh one.
 */
function withStatementCache(
  sqlite: BetterSqlite3.Database,
): Pick<BetterSqlite3.Database, 'close' | 'prepare'> {
  const statements = new Map<string, BetterSqlite3.Statement>();
  return {
    close: () => sqlite.close(),
    prepare: ((source: string) => {
      const cached = statements.get(source);
      if (cached && !cached.busy) return cached;
      const statement = sqlite.prepare(source);
      if (statements.size >= STATEMENT_CACHE_SIZE) statements.delete(statements.keys().next().value!);
      statements.set(source, statement);
      return statement;
    }) as BetterSqlite3.Database['prepare'],
  };
}

/** The files of a `sqlite:` database (the database, its -wal and -shm); none for PostgreSQL. */
export function sqliteFiles(url: string): string[] {
  if (!url.startsWith('sqlite:')) return [];
  const file = url.slice('sqlite:'.length);
  return file === ':memory:' ? [] : [file, `${file}-wal`, `${file}-shm`];
}

/**
 * Switches the file to WAL. Another process opening the same fresh file at the same moment can hold
 * the lock the switch needs, and SQLite answers SQLITE_BUSY at once there instead of calling the busy
 * handler; the switch is tried again for up to 5 s, as the busy timeout would wait.
 */
function enableWal(sqlite: BetterSqlite3.Database): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let waitedMs = 0; ; waitedMs += 10) {
    try {
      sqlite.pragma('journal_mode = WAL');
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== 'SQLITE_BUSY' || waitedMs >= 5000) throw err;
      Atomics.wait(pause, 0, 0, 10); // start-up only: a synchronous pause of 10 ms
    }
  }
}

function openSqlite(file: string, options: OpenOptions): Database {
  if (file !== ':memory:') {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    // Made here, empty, readable by the service's user only: SQLite gives the -wal and -shm files it
    // makes the database file's mode. An existing file keeps its mode.
    fs.closeSync(fs.openSync(file, 'a', 0o600));
  }
  const sqlite = new BetterSqlite3(file, { timeout: 5000 });
  enableWal(sqlite);
  // FULL: a committed transaction survives power loss, not only a process crash (a 200 means stored).
  sqlite.pragma('synchronous = FULL');
  sqlite.pragma('foreign_keys = ON');
  // 16 MiB of page cache. 64 MiB bought ingest nothing measurable and cost the account export
  // (a long scan fills the cache) its memory target.
  sqlite.pragma('cache_size = -16384');
  const db = new Kysely<Tables>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
  const notify = new LocalNotifyChannel(options.onNotifyError);
  return {
    dialect: 'sqlite',
    db,
    sqlite,
    pool: null,
    notify,
    close: async () => {
      await notify.close();
      await db.destroy();
    },
  };
}

async function openPostgres(url: string, options: OpenOptions): Promise<Database> {
  const schema = options.schema;
  if (schema && !/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`invalid schema name ${schema}`);
  if (schema) {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      // Under the migration lock: two `CREATE SCHEMA IF NOT EXISTS` at once can still collide.
      await admin.query('BEGIN');
      await admin.query(advisoryXactLockOfSchemaParam(MIGRATION_LOCK), [schema]);
      await admin.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
      await admin.query('COMMIT');
    } finally {
      await admin.end();
    }
  }
  const pool = new pg.Pool({
    connectionString: url,
    max: 10,
    ...(schema ? { options: `-c search_path=${schema}` } : {}),
  });
  pool.on('error', () => {
    // An idle client lost its connection; the pool replaces it. Queries in flight see their own error.
  });
  pool.on('connect', (client) => {
    // A client checked out of the pool (a transaction, the ingest store's unit of work) whose
    // connection ends (the server stopped or restarted) emits 'error' whether or not a query is in
    // flight; without a listener that is an uncaught exception and the whole process goes down. The
    // query in flight, and any later one on that client, fails with its own error (answered 503
    // `db_unavailable`), and the pool discards the client when it is released.
    client.on('error', () => undefined);
    endOnConnectionError(client);
  });
  const db = new Kysely<Tables>({ dialect: new PostgresDialect({ pool }) });
  // The schema the connections work in (set by `options`, or by the URL's own `options=-c search_path`)
  // names the notify channels, so installations in separate schemas of one database stay apart.
  let current: string | undefined;
  try {
    current =
      (await pool.query<{ s: string | null }>('SELECT current_schema() AS s')).rows[0]?.s ?? undefined;
  } catch (err) {
    await pool.end();
    throw err;
  }
  const notify = new PostgresNotifyChannel({
    url,
    pool,
    schema: current === 'public' ? undefined : current,
    onError: options.onNotifyError ?? (() => undefined),
  });
  return {
    dialect: 'postgres',
    db,
    sqlite: null,
    pool,
    notify,
    close: async () => {
      await notify.close();
      await db.destroy();
    },
  };
}

/**
 * Ends a pooled client as soon as one of its queries fails because the connection is gone. A query in
 * flight when its backend ends (terminated, the server stopping) fails with the server's own error a
 * moment before the socket closes; until the socket closes the client looks healthy, and the pool
 * would hand it, once released, to the next work, which would fail too. An ended client is discarded
 * on release, so the next work gets a new connection. Every path (Kysely's, the ingest store's) goes
 * through `query`, so it is wrapped here, once per connection.
 */
function endOnConnectionError(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  const wrapped = (...args: unknown[]): unknown => {
    const result = query(...args);
    if (result instanceof Promise)
      result.catch((err: unknown) => {
        if (isConnectionError(err)) client.end().catch(() => undefined);
      });
    return result;
  };
  client.query = wrapped as typeof client.query;
}

const DDL: Record<Dialect, DialectSql> = {
  sqlite: { dialect: 'sqlite', autoIncrementKey: 'INTEGER PRIMARY KEY AUTOINCREMENT' },
  postgres: { dialect: 'postgres', autoIncrementKey: 'BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY' },
};

/** The PostgreSQL advisory lock that serialises schema creation and migrations across processes. */
const MIGRATION_LOCK = 'migrations';

/**
 * Applies pending migrations in one transaction. On PostgreSQL an advisory lock makes replicas that
 * start together apply them once; on SQLite `BEGIN IMMEDIATE` does the same for processes on one file.
 * The bookkeeping table is created under the lock too: concurrent `CREATE TABLE IF NOT EXISTS` collide
 * on PostgreSQL.
 */
async function migrate(database: Database): Promise<void> {
  const { db, dialect } = database;
  await db.connection().execute(async (conn) => {
    await sql.raw(dialect === 'sqlite' ? 'BEGIN IMMEDIATE' : 'BEGIN').execute(conn);
    try {
      if (dialect === 'postgres') await sql.raw(advisoryXactLock(MIGRATION_LOCK)).execute(conn);
      await sql`CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)`.execute(
        conn,
      );
      const applied = await sql<{ name: string }>`SELECT name FROM schema_migrations`.execute(conn);
      const done = new Set(applied.rows.map((r) => r.name));
      for (const migration of MIGRATIONS) {
        if (done.has(migration.name)) continue;
        for (const statement of migration.statements(DDL[dialect])) await sql.raw(statement).execute(conn);
        await sql`INSERT INTO schema_migrations (name, applied_at) VALUES (${migration.name}, ${Date.now() * 1000})`.execute(
          conn,
        );
      }
      await sql.raw('COMMIT').execute(conn);
    } catch (err) {
      await sql.raw('ROLLBACK').execute(conn);
      throw err;
    }
  });
}

/** A unique or primary-key constraint was violated. */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/**
 * Text the database cannot store: PostgreSQL refuses U+0000 in text (22021) and JSON (22P05).
 * Inputs are checked before they reach a query; this catches any path that was missed.
 */
export function isUnstorableText(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '22021' || code === '22P05';
}

/**
 * node-postgres' errors for a connection that ended or never came up (the server stopped, a backend
 * was terminated, the pool's connect timed out), which carry no code.
 */
const PG_CONNECTION_MESSAGES = [
  'Connection terminated',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'timeout exceeded when trying to connect',
];

/**
 * The database could not be reached: connection refused, reset or ended, the server shutting down or
 * starting (57P01-57P03), the server ending an idle session (25P03, 57P05), or the pool timed out.
 */
export function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') {
    // node-postgres gives its own connection failures no code, only these messages.
    const message = err instanceof Error ? err.message : '';
    return PG_CONNECTION_MESSAGES.some((m) => message.startsWith(m));
  }
  return [
    'ECONNREFUSED',
    'ECONNRESET',
    'ETIMEDOUT',
    'EPIPE',
    '25P03',
    '57P01',
    '57P02',
    '57P03',
    '57P05',
    '08006',
    '08001',
    '08003',
  ].includes(code);
}

/**
 * A transaction that holds the write lock from its first statement, so work that reads and then
 * writes never fails halfway with SQLITE_BUSY when another process shares the file (BEGIN IMMEDIATE),
 * and, on PostgreSQL, that also holds the transaction-scoped advisory locks `(namespace, key)` for
 * `keys` (taken in ascending order), so replicas serialise work on the same keys (the rule engine
 * locks the channels it evaluates).
 *
 * `rows` also locks, on PostgreSQL, the rows of that table whose key column is one of `keys`, in
 * ascending key order, before the work runs: every writer of those rows that takes them in key
 * order (the ingest fold locks `sensors` the same way) then waits instead of deadlocking, however
 * the work orders its own statements. FOR NO KEY UPDATE is the lock an UPDATE takes anyway, and
 * leaves foreign-key share locks (rows inserted elsewhere that reference these) free. On SQLite the
 * transaction's write lock already excludes every other writer.
 *
 * `skipLocked`: keys another transaction holds are left out instead of waited for (PostgreSQL's
 * `pg_try_advisory_xact_lock`); `work` gets the keys this transaction holds (all of them on SQLite).
 * Replicas sharing background work then split it instead of queueing for the same keys.
 */
export async function lockedTransaction<T>(
  database: Database,
  lock: {
    namespace: string;
    keys: readonly number[];
    rows?: { table: 'sensors'; key: 'seq' };
    skipLocked?: boolean;
  },
  work: (db: Db, held: number[]) => Promise<T>,
): Promise<T> {
  const { db, dialect } = database;
  if (dialect === 'postgres') {
    return db.transaction().execute(async (trx) => {
      let keys = [...new Set(lock.keys)].sort((a, b) => a - b);
      if (keys.length > 0 && lock.skipLocked) {
        const got = await sql<{
          k: string;
        }>`SELECT k FROM (SELECT k FROM unnest(${keys}::bigint[]) AS k ORDER BY k) AS s
          WHERE pg_try_advisory_xact_lock(${sql.raw(advisoryKeyPer(lock.namespace, 's.k'))})`.execute(trx);
        keys = got.rows.map((r) => Number(r.k));
      } else if (keys.length > 0) {
        await sql`SELECT count(pg_advisory_xact_lock(${sql.raw(advisoryKeyPer(lock.namespace, 's.k'))}))
          FROM (SELECT k FROM unnest(${keys}::bigint[]) AS k ORDER BY k) AS s`.execute(trx);
      }
      if (keys.length > 0) {
        if (lock.rows) {
          const table = sql.table(lock.rows.table);
          const key = sql.ref(lock.rows.key);
          await sql`SELECT count(*) FROM (SELECT 1 FROM ${table} WHERE ${key} = ANY(${keys}::bigint[])
            ORDER BY ${key} FOR NO KEY UPDATE) AS l`.execute(trx);
        }
      }
      return work(trx, keys);
    });
  }
  return db.connection().execute(async (conn) => {
    await sql.raw('BEGIN IMMEDIATE').execute(conn);
    try {
      const result = await work(
        conn,
        [...new Set(lock.keys)].sort((a, b) => a - b),
      );
      await sql.raw('COMMIT').execute(conn);
      return result;
    } catch (err) {
      await sql.raw('ROLLBACK').execute(conn);
      throw err;
    }
  });
}

/**
 * The migrations this process knows that the database has not applied (empty when the schema is
 * current). A replica started from an older build sees newer migrations as applied and says nothing
 * of them: its own schema is there. Throws when the database does not answer.
 */
export async function pendingMigrations(db: Db): Promise<string[]> {
  const applied = await sql<{ name: string }>`SELECT name FROM schema_migrations`.execute(db);
  const done = new Set(applied.rows.map((r) => r.name));
  return MIGRATIONS.map((m) => m.name).filter((name) => !done.has(name));
}
