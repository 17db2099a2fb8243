import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { PostgresIngestStore } from '../../../cloud/src/ingest/ingest.store.postgres.ts';
import { openDatabase, type Database } from '../../../cloud/src/storage/database.ts';
import { SqliteIngestStore } from '../../../cloud/src/ingest/ingest.store.sqlite.ts';
import type { IngestStore } from '../../../cloud/src/ingest/ingest.types.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';

const AT = Date.UTC(2026, 10, 1) * 1000;

/**
 * Groups written at once (PostgreSQL writes up to 4) share device rows, and take their locks in id
 * order, whatever plan PostgreSQL picks for the write: two groups that took them in two orders
 * deadlocked, and one of them failed after its retry (seen in the MQTT bench, where every group
 * names all 50 devices). The write is made to see the devices in the other order: the device with
 * the lower id is updated, so its row moves behind the other in the table, and index scans are off,
 * so the table is read in that physical order.
 */
describe('ingest groups that share devices', () => {
  it('are written one at a time on SQLite (one writer: no lock order to keep)', async () => {
    const target = testDatabase('sqlite');
    const database = await openDatabase(target.url);
    try {
      const store: IngestStore = new SqliteIngestStore(database.db, database.sqlite!);
      expect(store.concurrency ?? 1).toBe(1);
    } finally {
      await database.close();
      await target.dispose();
    }
  });
});

// Registered where PostgreSQL is (TEST_DATABASE_URL; CI always sets it), as DATABASES does.
if (DATABASES.includes('postgres'))
  describe('ingest groups that share devices, on PostgreSQL', () => {
    let target: TestDatabase;
    let database: Database;
    let pool: pg.Pool;
    const clients: pg.PoolClient[] = [];

    beforeEach(async () => {
      target = testDatabase('postgres');
      database = await openDatabase(target.url, { schema: target.schema });
      pool = new pg.Pool({
        connectionString: target.url,
        application_name: `lock-order-${target.schema}`,
        options: `-c search_path=${target.schema} -c enable_indexscan=off -c enable_bitmapscan=off`,
      });
    });
    afterEach(async () => {
      for (const c of clients.splice(0)) {
        await c.query('ROLLBACK').catch(() => undefined);
        c.release();
      }
      await pool?.end();
      await database?.close();
      await target?.dispose();
    });

    async function twoDevices(): Promise<{ low: string; high: string }> {
      const { db } = database;
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
      const device = (id: string) => ({
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
      });
      await db
        .insertInto('devices')
        .values([device('dev_a'), device('dev_b')])
        .execute();
      // dev_a's new row version goes behind dev_b's: a sequential scan meets dev_b first.
      await db.updateTable('devices').set({ notes: 'moved' }).where('id', '=', 'dev_a').execute();
      const order = await db.selectFrom('devices').select('id').execute(); // heap order (no ORDER BY)
      expect(order.map((r) => r.id)).toEqual(['dev_b', 'dev_a']);
      return { low: 'dev_a', high: 'dev_b' };
    }

    async function holdRow(id: string): Promise<pg.PoolClient> {
      const client = await pool.connect();
      clients.push(client);
      await client.query('BEGIN');
      await client.query('SELECT 1 FROM devices WHERE id = $1 FOR UPDATE', [id]);
      return client;
    }

    it('lock devices in id order: waiting for the lower id, a write holds no higher one', async () => {
      const { low, high } = await twoDevices();
      const blocker = await holdRow(low);
      const store = new PostgresIngestStore(pool);
      const write = store.transaction(async (tx) =>
        tx.write({
          points: new Float64Array(0),
          at: AT,
          devices: [
            { id: low, lastSeenAt: AT, online: 1 },
            { id: high, lastSeenAt: AT, online: 1 },
          ],
          job: null,
        }),
      );
      // The write is waiting for a row lock (the blocker's).
      await eventually(async () => {
        const { rows } = await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
          [`lock-order-${target.schema}`],
        );
        return rows[0]!.n === 1;
      }, 'the write to wait for the row lock');
      // It must not hold the higher id meanwhile: a group that had locked it first would now be
      // waiting for this one, which is the deadlock.
      const probe = await pool.connect();
      clients.push(probe);
      await probe.query('BEGIN');
      await expect(
        probe.query('SELECT 1 FROM devices WHERE id = $1 FOR UPDATE NOWAIT', [high]),
      ).resolves.toBeDefined();
      await probe.query('ROLLBACK');
      await blocker.query('ROLLBACK');
      await write;
      const rows = await database.db.selectFrom('devices').select(['id', 'online']).orderBy('id').execute();
      expect(rows).toEqual([
        { id: low, online: 1 },
        { id: high, online: 1 },
      ]);
    });
  });
