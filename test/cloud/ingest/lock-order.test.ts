import { describe, expect, it } from '@jest/globals';
import { PostgresIngestStore } from '../../../cloud/src/ingest/ingest.store.postgres.ts';
import { openDatabase } from '../../../cloud/src/storage/database.ts';
import { SqliteIngestStore } from '../../../cloud/src/ingest/ingest.store.sqlite.ts';
import type { IngestStore } from '../../../cloud/src/ingest/ingest.types.ts';
import { DATABASES, testDatabase } from '../../helpers/databases.ts';
import { AT, expectHeapOrder, insertDevices, lockedDatabaseEachTest } from '../../helpers/row-locks.ts';

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
    const each = lockedDatabaseEachTest('lock-order');

    async function twoDevices(): Promise<{ low: string; high: string }> {
      const { db } = each.database;
      await insertDevices(db, ['dev_a', 'dev_b']);
      // dev_a's new row version goes behind dev_b's: a sequential scan meets dev_b first.
      await db.updateTable('devices').set({ notes: 'moved' }).where('id', '=', 'dev_a').execute();
      await expectHeapOrder(each.locks, 'devices', 'id', ['dev_b', 'dev_a']);
      return { low: 'dev_a', high: 'dev_b' };
    }

    it('lock devices in id order: waiting for the lower id, a write holds no higher one', async () => {
      const { low, high } = await twoDevices();
      const blocker = await each.locks.hold('devices', 'id', low);
      const store = new PostgresIngestStore(each.locks.pool);
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
      await each.locks.waiting();
      // It must not hold the higher id meanwhile: a group that had locked it first would now be
      // waiting for this one, which is the deadlock.
      expect(await each.locks.lockable('SELECT 1 FROM devices WHERE id = $1 FOR UPDATE NOWAIT', high)).toBe(
        true,
      );
      await blocker.query('ROLLBACK');
      await write;
      const rows = await each.database.db
        .selectFrom('devices')
        .select(['id', 'online'])
        .orderBy('id')
        .execute();
      expect(rows).toEqual([
        { id: low, online: 1 },
        { id: high, online: 1 },
      ]);
    });
  });
