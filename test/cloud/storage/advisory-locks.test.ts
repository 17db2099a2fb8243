import { afterEach, describe, expect, it } from '@jest/globals';
import { PostgresIngestStore } from '../../../cloud/src/ingest/ingest.store.postgres.ts';
import { lockedTransaction, openDatabase, type Database } from '../../../cloud/src/storage/database.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';

/**
 * PostgreSQL's advisory locks are one space per database. Two installations in separate schemas of
 * one database take the same named locks (the fold, a channel's evaluation, migrations) and must
 * not wait on each other; two processes of one installation must.
 */
const CHANNEL = 'rules-channel';

/** A transaction holding `work`'s locks until the answer's `release` is called. */
function hold(database: Database, keys: number[]): Promise<{ release: () => void; done: Promise<void> }> {
  return new Promise((resolveHeld) => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const done = lockedTransaction(database, { namespace: CHANNEL, keys }, async () => {
      resolveHeld({ release, done });
      await released;
    });
  });
}

if (DATABASES.includes('postgres'))
  describe('advisory locks on PostgreSQL', () => {
    const opened: Database[] = [];
    const targets: TestDatabase[] = [];
    afterEach(async () => {
      for (const d of opened.splice(0)) await d.close();
      for (const t of targets.splice(0)) await t.dispose();
    });

    async function open(target?: TestDatabase): Promise<Database> {
      const t = target ?? testDatabase('postgres');
      if (!target) targets.push(t);
      const database = await openDatabase(t.url, { schema: t.schema });
      opened.push(database);
      return database;
    }

    it('are held per installation: another schema takes the same channel lock, the same schema does not', async () => {
      const a = await open();
      const b = await open();
      const sameAsA = await open(targets[0]);
      const held = await hold(a, [1, 2]);
      const inB = await lockedTransaction(
        b,
        { namespace: CHANNEL, keys: [1, 2], skipLocked: true },
        async (_db, keys) => keys,
      );
      expect(inB).toEqual([1, 2]);
      const inA = await lockedTransaction(
        sameAsA,
        { namespace: CHANNEL, keys: [1, 2, 3], skipLocked: true },
        async (_db, keys) => keys,
      );
      expect(inA).toEqual([3]);
      held.release();
      await held.done;
    });

    it('let a fold in one schema run while a fold in another holds its turn', async () => {
      const a = await open();
      const b = await open();
      const storeA = new PostgresIngestStore(a.pool!);
      const storeB = new PostgresIngestStore(b.pool!);
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let heldA!: () => void;
      const aHolds = new Promise<void>((r) => (heldA = r));
      const foldA = storeA.fold(async () => {
        heldA();
        await released;
      });
      await aHolds;
      await expect(storeB.fold(async () => 'folded')).resolves.toBe('folded');
      release();
      await foldA;
    });
  });
