import { afterEach, describe, expect, it } from '@jest/globals';
import { sql } from 'kysely';
import { openDatabase, type Database } from '../../../cloud/src/storage/database.ts';
import { measurementGroups } from '../../../cloud/src/storage/migrations/0006_measurement_groups.ts';
import { measurementGroup } from '../../../cloud/src/storage/layout.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';

describe.each(DATABASES)('migration 0006 (measurement groups of 64) on %s', (kind) => {
  let td: TestDatabase;
  let database: Database;
  afterEach(async () => {
    await database?.close();
    await td?.dispose();
  });

  it('moves rows stored in groups of 16 into groups of 64, keeping every row', async () => {
    td = testDatabase(kind);
    database = await openDatabase(td.url, { schema: td.schema });
    const { db } = database;
    const seqs = [1, 15, 16, 63, 64, 100, 1000];
    const ts = Date.parse('2026-11-01T00:00:00Z') * 1000;
    // As a database written before 0006 holds them: grp = seq >> 4.
    await db
      .insertInto('measurements')
      .values(seqs.map((seq, i) => ({ grp: seq >> 4, sensor_seq: seq, ts: ts + i, value: i })))
      .execute();
    for (const statement of measurementGroups.statements({ dialect: kind, autoIncrementKey: '' }))
      await sql.raw(statement).execute(db);
    const rows = await db.selectFrom('measurements').selectAll().orderBy('sensor_seq').execute();
    expect(rows.map((r) => [Number(r.grp), Number(r.sensor_seq), Number(r.value)])).toEqual(
      seqs.map((seq, i) => [measurementGroup(seq), seq, i]),
    );
    expect(measurementGroup(63)).toBe(0);
    expect(measurementGroup(64)).toBe(1);
  });
});
