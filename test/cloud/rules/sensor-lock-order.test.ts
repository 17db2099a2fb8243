import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { PostgresIngestStore } from '../../../cloud/src/ingest/ingest.store.postgres.ts';
import { createLogger } from '../../../cloud/src/logger.ts';
import { RuleEngine } from '../../../cloud/src/rules/rule-engine.ts';
import { RulesRepository } from '../../../cloud/src/rules/rules.repository.ts';
import { openDatabase, type Database } from '../../../cloud/src/storage/database.ts';
import { measurementGroup } from '../../../cloud/src/storage/layout.ts';
import type { Tables } from '../../../cloud/src/storage/schema.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';

const AT = Date.UTC(2026, 10, 1) * 1000;

/** Two temperature channels of one device, each marked with one unevaluated in-range sample. */
async function seedTwoChannels(db: Kysely<Tables>): Promise<{ low: number; high: number }> {
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
    .values({
      id: 'dev_1',
      account_id: 'acc_1',
      site_id: 'sit_1',
      local_id: 'd1',
      name: 'd1',
      notes: '',
      model: 'http-generic',
      fw_version: null,
      token_hash: null,
      token_issued_at: AT,
      last_seen_at: null,
      online: 0,
      created_at: AT,
      deleted_at: null,
    })
    .execute();
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
  const [a, b] = rows.map((r) => r.seq).sort((x, y) => x - y) as [number, number];
  await db
    .insertInto('measurements')
    .values([a, b].map((seq) => ({ grp: measurementGroup(seq), sensor_seq: seq, ts: AT, value: 3 })))
    .execute();
  // The marker as the fold leaves it; the lower seq's new row version goes behind the other's.
  await db.updateTable('sensors').set({ eval_from: AT, eval_gen: 1 }).where('seq', '=', b).execute();
  // The lower seq already shows the state its sample gives: an evaluation writes it only to clear
  // the marker, after the higher seq's state.
  await db
    .updateTable('sensors')
    .set({ eval_from: AT, eval_gen: 1, state: 'ok' })
    .where('seq', '=', a)
    .execute();
  return { low: a, high: b };
}

/**
 * The two background writers of `sensors` rows, the ingest fold (last values and the rule engine's
 * marker) and the rule engine (state, clearing the marker), both lock the rows of the channels they
 * touch in seq order before writing any: two writers that took them in two orders deadlocked, one
 * or two times per ingest benchmark run. Each test holds the lower seq's row in a transaction of its
 * own, lets the writer wait for it, and checks that the writer meanwhile holds no higher seq (a
 * writer that had locked that one first would now wait for this one: the deadlock). The writers run
 * with index scans off and the lower seq's row moved behind the other in the table, so an UPDATE
 * ... FROM or a plain read meets the rows in the other order.
 */
if (DATABASES.includes('postgres'))
  describe('writers of sensor rows, on PostgreSQL', () => {
    let target: TestDatabase;
    let database: Database;
    let pool: pg.Pool;
    let seqScans: Database;
    const clients: pg.PoolClient[] = [];
    let low = 0;
    let high = 0;

    beforeEach(async () => {
      target = testDatabase('postgres');
      database = await openDatabase(target.url, { schema: target.schema });
      pool = new pg.Pool({
        connectionString: target.url,
        application_name: `sensor-lock-order-${target.schema}`,
        options: `-c search_path=${target.schema} -c enable_indexscan=off -c enable_bitmapscan=off`,
      });
      seqScans = {
        dialect: 'postgres',
        db: new Kysely<Tables>({ dialect: new PostgresDialect({ pool }) }),
        sqlite: null,
        pool,
        close: async () => undefined,
      };
      ({ low, high } = await twoChannels());
    });
    afterEach(async () => {
      for (const c of clients.splice(0)) {
        await c.query('ROLLBACK').catch(() => undefined);
        c.release();
      }
      await seqScans?.db.destroy();
      await database?.close();
      await target?.dispose();
    });

    async function twoChannels(): Promise<{ low: number; high: number }> {
      const seeded = await seedTwoChannels(database.db);
      const order = await seqScans.db.selectFrom('sensors').select('seq').execute(); // heap order
      expect(order.map((r) => r.seq)).toEqual([seeded.high, seeded.low]);
      return seeded;
    }

    async function holdSensor(seq: number): Promise<pg.PoolClient> {
      const client = await pool.connect();
      clients.push(client);
      await client.query('BEGIN');
      await client.query('SELECT 1 FROM sensors WHERE seq = $1 FOR UPDATE', [seq]);
      return client;
    }

    /** Waits until the writer is blocked on a row lock, then checks what it holds meanwhile. */
    async function expectWaitingHoldingNothingOf(seq: number, alsoFree?: string): Promise<void> {
      await eventually(async () => {
        const { rows } = await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
          [`sensor-lock-order-${target.schema}`],
        );
        return rows[0]!.n === 1;
      }, 'the writer to wait for the row lock');
      const probe = await pool.connect();
      clients.push(probe);
      await probe.query('BEGIN');
      await expect(
        probe.query('SELECT 1 FROM sensors WHERE seq = $1 FOR UPDATE NOWAIT', [seq]),
      ).resolves.toBeDefined();
      if (alsoFree) await expect(probe.query(alsoFree, [seq])).resolves.toBeDefined();
      await probe.query('ROLLBACK');
    }

    it('the fold locks the channels it writes in seq order', async () => {
      const blocker = await holdSensor(low);
      const store = new PostgresIngestStore(pool);
      const fold = store.fold(async (tx) =>
        tx.updateSensorLast([
          { sensorSeq: low, ts: AT + 1, value: 4, minTs: AT + 1 },
          { sensorSeq: high, ts: AT + 1, value: 4, minTs: AT + 1 },
        ]),
      );
      await expectWaitingHoldingNothingOf(high);
      await blocker.query('ROLLBACK');
      await fold;
      const rows = await database.db
        .selectFrom('sensors')
        .select(['seq', 'last_value', 'eval_gen'])
        .orderBy('seq')
        .execute();
      expect(rows).toEqual([
        { seq: low, last_value: 4, eval_gen: 2 },
        { seq: high, last_value: 4, eval_gen: 2 },
      ]);
    });

    it('the rule engine locks the channels it evaluates in seq order, before their trackers', async () => {
      const blocker = await holdSensor(low);
      const engine = new RuleEngine({
        database: seqScans,
        clock: new ManualClock(AT + 1_000_000),
        log: createLogger('silent'),
        repository: new RulesRepository(),
        notifier: { notify: async () => undefined },
      });
      const evaluation = engine.evaluate([high, low], AT + 1_000_000);
      await expectWaitingHoldingNothingOf(
        high,
        'SELECT 1 FROM channel_trackers WHERE sensor_seq = $1 FOR UPDATE NOWAIT',
      );
      await blocker.query('ROLLBACK');
      await evaluation;
      const rows = await database.db
        .selectFrom('sensors')
        .select(['seq', 'state', 'eval_from'])
        .orderBy('seq')
        .execute();
      expect(rows).toEqual([
        { seq: low, state: 'ok', eval_from: null },
        { seq: high, state: 'ok', eval_from: null },
      ]);
    });
  });

describe.each(DATABASES)('an evaluation with its sensor rows locked, on %s', (kind) => {
  it('evaluates both channels and clears their markers (on SQLite the write lock covers the rows)', async () => {
    const target = testDatabase(kind);
    const database = await openDatabase(target.url, { schema: target.schema });
    try {
      const { low, high } = await seedTwoChannels(database.db);
      const engine = new RuleEngine({
        database,
        clock: new ManualClock(AT + 1_000_000),
        log: createLogger('silent'),
        repository: new RulesRepository(),
        notifier: { notify: async () => undefined },
      });
      expect((await engine.evaluate([high, low], AT + 1_000_000)).channels).toBe(2);
      const rows = await database.db
        .selectFrom('sensors')
        .select(['seq', 'state', 'eval_from'])
        .orderBy('seq')
        .execute();
      expect(rows).toEqual([
        { seq: low, state: 'ok', eval_from: null },
        { seq: high, state: 'ok', eval_from: null },
      ]);
    } finally {
      await database.close();
      await target.dispose();
    }
  });
});
