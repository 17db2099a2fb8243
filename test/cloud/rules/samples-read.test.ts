import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { RulesRepository } from '../../../cloud/src/rules/rules.repository.ts';
import { openDatabase, type Database } from '../../../cloud/src/storage/database.ts';
import { measurementGroup } from '../../../cloud/src/storage/layout.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';

const MINUTE = 60 * 1_000_000;
const T0 = Date.UTC(2026, 10, 1) * 1000;

/**
 * The rule engine's batched read: channels of one group share a range read when their starting
 * points lie close together, and one far behind (a first look) reads on its own; every channel gets
 * exactly its own rows in (after, until], oldest first, whatever it shares a read with.
 */
describe.each(DATABASES)('samples of many channels on %s', (kind) => {
  let target: TestDatabase;
  let database: Database;
  const repo = new RulesRepository();

  beforeEach(async () => {
    target = testDatabase(kind);
    database = await openDatabase(target.url, { schema: target.schema });
  });
  afterEach(async () => {
    await database?.close();
    await target?.dispose();
  });

  it('gives each channel its own rows after its own start and up to its own end', async () => {
    // seqs 1..3 share a group; 70 is in the next; a row every 10 minutes for 10 hours
    const seqs = [1, 2, 3, 70];
    const rows = seqs.flatMap((seq) =>
      Array.from({ length: 60 }, (_, i) => ({
        grp: measurementGroup(seq),
        sensor_seq: seq,
        ts: T0 + i * 10 * MINUTE,
        value: seq * 1000 + i,
      })),
    );
    await database.db.insertInto('measurements').values(rows).execute();
    const at = (i: number) => T0 + i * 10 * MINUTE;
    const read = await repo.samplesAfterMany(database.db, [
      { seq: 1, after: at(55), until: at(59) }, // appended data
      { seq: 2, after: Number.MIN_SAFE_INTEGER, until: at(2) }, // a first look, far behind
      { seq: 3, after: at(56), until: at(57) },
      { seq: 70, after: at(57), until: Number.MAX_SAFE_INTEGER },
    ]);
    const values = (seq: number) => read.get(seq)!.map((s) => s.value - seq * 1000);
    expect(values(1)).toEqual([56, 57, 58, 59]);
    expect(values(2)).toEqual([0, 1, 2]);
    expect(values(3)).toEqual([57]);
    expect(values(70)).toEqual([58, 59]);
    expect(read.get(1)!.map((s) => s.ts)).toEqual([at(56), at(57), at(58), at(59)]);
  });
});
