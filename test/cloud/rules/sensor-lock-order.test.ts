import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { Kysely, PostgresDialect } from 'kysely';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { PostgresIngestStore } from '../../../cloud/src/ingest/ingest.store.postgres.ts';
import { createLogger } from '../../../cloud/src/logger.ts';
import { RuleEngine } from '../../../cloud/src/rules/rule-engine.ts';
import { RulesRepository } from '../../../cloud/src/rules/rules.repository.ts';
import { openDatabase, type Database, type Db } from '../../../cloud/src/storage/database.ts';
import { measurementGroup } from '../../../cloud/src/storage/layout.ts';
import type { Tables } from '../../../cloud/src/storage/schema.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';
import { AT, expectHeapOrder, insertDevices, rowLocks, type RowLocks } from '../../helpers/row-locks.ts';

const NOW = AT + 1_000_000;

/**
 * Two temperature channels of one device, each marked with one unevaluated in-range sample. The
 * lower seq already shows the state its sample gives, so an evaluation writes its row only to clear
 * the marker, after the higher seq's state; and its row version goes behind the other's in the table.
 */
async function seedTwoChannels(db: Db): Promise<{ low: number; high: number }> {
  await insertDevices(db, ['dev_1']);
  const sensor = (n: number) => ({
    id: `snr_${n}`,
    channel_id: `chn_${n}`,
    account_id: 'acc_1',
    device_id: 'dev_1',
    kind: 'temperature',
    label: `t${n}`,
    label_key: `t${n}`,
    unit: '°C',
    ok_min: 0,
    ok_max: 5,
    grace_min: 0,
    rule_enabled: 1,
    no_data_min: 60,
    last_value: 3,
    last_ts: AT,
    state: 'no_data' as const,
    created_at: AT,
  });
  const rows = await db
    .insertInto('sensors')
    .values([sensor(1), sensor(2)])
    .returning('seq')
    .execute();
  const [low, high] = rows.map((r) => r.seq).sort((x, y) => x - y) as [number, number];
  await db
    .insertInto('measurements')
    .values([low, high].map((seq) => ({ grp: measurementGroup(seq), sensor_seq: seq, ts: AT, value: 3 })))
    .execute();
  await db.updateTable('sensors').set({ eval_from: AT, eval_gen: 1 }).where('seq', '=', high).execute();
  await db
    .updateTable('sensors')
    .set({ eval_from: AT, eval_gen: 1, state: 'ok' })
    .where('seq', '=', low)
    .execute();
  return { low, high };
}

function engineOn(database: Database): RuleEngine {
  return new RuleEngine({
    database,
    clock: new ManualClock(NOW),
    log: createLogger('silent'),
    repository: new RulesRepository(),
    notifier: { notify: async () => undefined },
  });
}

const sensorsOf = (db: Db) =>
  db.selectFrom('sensors').select(['seq', 'state', 'eval_from', 'last_value']).orderBy('seq').execute();

/**
 * The two background writers of `sensors` rows, the ingest fold (last values and the rule engine's
 * marker) and the rule engine (state, clearing the marker), both lock the rows of the channels they
 * touch in seq order before writing any: two writers that took them in two orders deadlocked, one
 * or two times per ingest benchmark run. Each test holds the lower seq's row, lets the writer wait
 * for it, and checks that the writer meanwhile holds no higher seq. The writers run with index scans
 * off and the lower seq's row behind the other in the table, so an UPDATE ... FROM or a plain read
 * meets the rows in the other order.
 */
if (DATABASES.includes('postgres'))
  describe('writers of sensor rows, on PostgreSQL', () => {
    let target: TestDatabase;
    let database: Database;
    let locks: RowLocks;
    let low = 0;
    let high = 0;

    beforeEach(async () => {
      target = testDatabase('postgres');
      database = await openDatabase(target.url, { schema: target.schema });
      locks = rowLocks(target, 'sensor-lock-order');
      ({ low, high } = await seedTwoChannels(database.db));
      await expectHeapOrder(locks, 'sensors', 'seq', [high, low]);
    });
    afterEach(async () => {
      await locks?.close();
      await database?.close();
      await target?.dispose();
    });

    const sensorFree = (seq: number) =>
      locks.lockable('SELECT 1 FROM sensors WHERE seq = $1 FOR UPDATE NOWAIT', seq);

    it('the fold locks the channels it writes in seq order', async () => {
      const blocker = await locks.hold('sensors', 'seq', low);
      const fold = new PostgresIngestStore(locks.pool).fold(async (tx) =>
        tx.updateSensorLast([
          { sensorSeq: low, ts: AT + 1, value: 4, minTs: AT + 1 },
          { sensorSeq: high, ts: AT + 1, value: 4, minTs: AT + 1 },
        ]),
      );
      await locks.waiting();
      expect(await sensorFree(high)).toBe(true);
      await blocker.query('ROLLBACK');
      await fold;
      expect((await sensorsOf(database.db)).map((r) => r.last_value)).toEqual([4, 4]);
    });

    it('the rule engine locks the channels it evaluates in seq order, before their trackers', async () => {
      const blocker = await locks.hold('sensors', 'seq', low);
      const seqScans: Database = {
        dialect: 'postgres',
        db: new Kysely<Tables>({ dialect: new PostgresDialect({ pool: locks.pool }) }),
        sqlite: null,
        pool: locks.pool,
        notify: database.notify,
        close: async () => undefined,
      };
      const evaluation = engineOn(seqScans).evaluate([high, low], NOW);
      await locks.waiting();
      expect(await sensorFree(high)).toBe(true);
      const trackerFree = 'SELECT 1 FROM channel_trackers WHERE sensor_seq = $1 FOR UPDATE NOWAIT';
      expect(await locks.lockable(trackerFree, high)).toBe(true);
      await blocker.query('ROLLBACK');
      await evaluation;
      expect(await sensorsOf(database.db)).toEqual([
        { seq: low, state: 'ok', eval_from: null, last_value: 3 },
        { seq: high, state: 'ok', eval_from: null, last_value: 3 },
      ]);
    });
  });

describe.each(DATABASES)('an evaluation with its sensor rows locked, on %s', (kind) => {
  it('evaluates both channels and clears their markers (on SQLite the write lock covers the rows)', async () => {
    const target = testDatabase(kind);
    const database = await openDatabase(target.url, { schema: target.schema });
    try {
      const { low, high } = await seedTwoChannels(database.db);
      expect((await engineOn(database).evaluate([high, low], NOW)).channels).toBe(2);
      expect(await sensorsOf(database.db)).toEqual([
        { seq: low, state: 'ok', eval_from: null, last_value: 3 },
        { seq: high, state: 'ok', eval_from: null, last_value: 3 },
      ]);
    } finally {
      await database.close();
      await target.dispose();
    }
  });
});
