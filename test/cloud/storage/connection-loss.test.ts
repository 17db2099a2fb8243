import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { toApiError } from '../../../cloud/src/http/error-handler.ts';
import { isConnectionError, openDatabase, type Database } from '../../../cloud/src/storage/database.ts';
import { testDatabase, type TestDatabase } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';

/**
 * A PostgreSQL connection that ends under the cloud (the server stopped or restarted, a backend
 * terminated): found by the chaos scenario `pg-outage` (docs/reliability.md), where the first stop of
 * the server took the whole cloud down with an uncaught 'error' event of a pooled client.
 */
async function terminate(url: string, pids: number[]): Promise<void> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [pids]);
  } finally {
    await admin.end();
  }
}

describe('connection errors of node-postgres', () => {
  it('are database outages (503 db_unavailable with Retry-After), though they carry no code', () => {
    for (const message of [
      'Connection terminated unexpectedly',
      'Client has encountered a connection error and is not queryable',
      'timeout exceeded when trying to connect',
    ]) {
      expect(isConnectionError(new Error(message))).toBe(true);
      const answer = toApiError(new Error(message));
      expect([answer.status, answer.code, answer.headers?.['Retry-After']]).toEqual([
        503,
        'db_unavailable',
        '2',
      ]);
    }
    for (const code of ['57P01', '25P03', '57P05'])
      expect(isConnectionError(Object.assign(new Error('x'), { code }))).toBe(true);
    for (const code of ['23505', '40001', '57014'])
      expect(isConnectionError(Object.assign(new Error('x'), { code }))).toBe(false);
    expect(isConnectionError(new Error('syntax error at or near "x"'))).toBe(false);
  });
});

// Registered where PostgreSQL is (TEST_DATABASE_URL; CI always sets it), as DATABASES does.
if (process.env.TEST_DATABASE_URL) {
  describe('a pooled PostgreSQL connection that ends', () => {
    let td: TestDatabase;
    let database: Database;
    beforeAll(async () => {
      td = testDatabase('postgres');
      database = await openDatabase(td.url, { schema: td.schema });
    });
    afterAll(async () => {
      await database?.close();
      await td?.dispose();
    });

    it('fails the work on it, not the process, and the pool serves the next work on a new connection', async () => {
      const client = await database.pool!.connect();
      const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      // Checked out and idle when its backend goes: pg emits 'error' on the client (an uncaught
      // exception without a listener).
      await terminate(td.url, [pid]);
      const failed = await eventually(
        () =>
          client.query('SELECT 1').then(
            () => null,
            (err: unknown) => err,
          ),
        'the ended connection to fail a query',
        30_000,
      );
      expect(isConnectionError(failed)).toBe(true);
      client.release();
      const again = await database.pool!.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      expect(again.rows[0]!.pid).not.toBe(pid);
    });

    it('is not handed to the next work when its query failed before the socket closed', async () => {
      for (let round = 0; round < 5; round++) {
        const client = await database.pool!.connect();
        const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        // A query in flight when the backend goes fails with the server's own error (57P01) a moment
        // before the socket closes; released at once, the client still looks healthy.
        const inFlight = client.query('SELECT pg_sleep(30)').then(
          () => null,
          (err: unknown) => err,
        );
        await eventually(
          async () =>
            (
              await database.pool!.query<{ n: number }>(
                "SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1 AND state = 'active'",
                [pid],
              )
            ).rows[0]!.n === 1,
          'the sleep to be running',
        );
        await terminate(td.url, [pid]);
        const failed = await inFlight;
        expect(isConnectionError(failed)).toBe(true);
        client.release();
        const again = await database.pool!.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        expect(again.rows[0]!.pid).not.toBe(pid);
      }
    });
  });
}
