import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { announce, applyReconciliation } from '../../../cloud/src/rules/evaluation.steps.ts';
import type { Desired } from '../../../cloud/src/rules/reconcile.ts';
import type { ChannelRow } from '../../../cloud/src/rules/rules.repository.ts';
import { openDatabase, type Database } from '../../../cloud/src/storage/database.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';

const MINUTE = 60_000_000;
const T0 = Date.UTC(2026, 10, 1) * 1000;
const at = (minutes: number) => T0 + minutes * MINUTE;

const CHANNEL: ChannelRow = {
  seq: 1,
  id: 'snr_1',
  channel_id: 'chn_1',
  account_id: 'acc_1',
  device_id: 'dev_1',
  kind: 'temperature',
  unit: 'C',
  ok_min: 2,
  ok_max: 8,
  grace_min: 10,
  rule_enabled: 1,
  no_data_min: 60,
  state: 'ok',
  last_ts: null,
  eval_from: null,
  eval_gen: 0,
  site_id: 'sit_1',
  device_deleted_at: null,
};

function desired(over: Partial<Desired> = {}): Desired {
  return {
    kind: 'threshold_high',
    startedAt: at(0),
    alarmAt: at(10),
    endedAt: null,
    peak: 12,
    okMin: 2,
    okMax: 8,
    silenced: false,
    ...over,
  };
}

/**
 * The steps of a rule evaluation that write alarm events, on each database: a reconciliation's
 * inserts, updates and withdrawals land as rows and come back as the channel's events as they now
 * stand; a due notification is recorded as sent.
 */
describe.each(DATABASES)('rule evaluation steps that write, on %s', (kind) => {
  let target: TestDatabase;
  let database: Database;

  beforeEach(async () => {
    target = testDatabase(kind);
    database = await openDatabase(target.url, { schema: target.schema });
    await database.db
      .insertInto('accounts')
      .values({ id: 'acc_1', name: 'a', created_at: at(0) })
      .execute();
  });
  afterEach(async () => {
    await database?.close();
    await target?.dispose();
  });

  const stored = () => database.db.selectFrom('alarm_events').selectAll().orderBy('started_at').execute();

  it('applyReconciliation inserts, updates, withdraws and keeps events, and answers all of them', async () => {
    const db = database.db;
    const inserted = await applyReconciliation(
      db,
      CHANNEL,
      [],
      {
        insert: [desired(), desired({ startedAt: at(30), alarmAt: at(40), peak: 15 })],
        update: [],
        withdraw: [],
        unchanged: [],
      },
      at(41),
    );
    expect(inserted.map((e) => [e.started_at, e.ended_at, e.peak_value, e.sensor_seq, e.created_at])).toEqual(
      [
        [at(0), null, 12, 1, at(41)],
        [at(30), null, 15, 1, at(41)],
      ],
    );
    const rows = await stored();
    expect(rows.map((e) => e.id)).toEqual(inserted.map((e) => e.id));

    const [first, second] = rows;
    const third = await applyReconciliation(
      db,
      CHANNEL,
      rows,
      {
        insert: [],
        update: [{ id: first!.id, to: desired({ endedAt: at(20), peak: 13 }), reinstate: false }],
        withdraw: [second!.id],
        unchanged: [],
      },
      at(50),
    );
    expect(third.map((e) => [e.id, e.ended_at, e.peak_value, e.withdrawn_at, e.updated_at])).toEqual([
      [first!.id, at(20), 13, null, at(50)],
      [second!.id, null, 15, at(50), at(50)],
    ]);
    expect((await stored()).map((e) => [e.ended_at, e.peak_value, e.withdrawn_at])).toEqual([
      [at(20), 13, null],
      [null, 15, at(50)],
    ]);

    const kept = await applyReconciliation(
      db,
      CHANNEL,
      await stored(),
      { insert: [], update: [], withdraw: [], unchanged: [first!.id] },
      at(60),
    );
    expect(kept.map((e) => [e.id, e.updated_at])).toEqual([[first!.id, at(50)]]);
  });

  it('announce records the notification due as sent and answers it; an event due none is left as it is', async () => {
    const db = database.db;
    const [event] = await applyReconciliation(
      db,
      CHANNEL,
      [],
      { insert: [desired()], update: [], withdraw: [], unchanged: [] },
      at(11),
    );
    expect(await announce(db, event!, [{ from: at(0), to: at(30) }], at(11))).toBeNull();
    expect((await stored())[0]!.notified_open_at).toBeNull();

    const transition = await announce(db, event!, [], at(12));
    expect(transition).toMatchObject({
      opened: true,
      resolved: false,
      event: { id: event!.id, notified_open_at: at(12) },
    });
    expect((await stored())[0]!.notified_open_at).toBe(at(12));
  });
});
