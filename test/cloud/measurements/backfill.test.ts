import { afterEach, describe, expect, it } from '@jest/globals';
import { sql } from 'kysely';
import { rollupDeltas } from '../../../cloud/src/measurements/rollups.ts';
import { reads } from '../../../cloud/src/storage/migrations/0003_reads.ts';
import { openDatabase, type Database } from '../../../cloud/src/storage/database.ts';
import { measurementGroup, rollupGroup } from '../../../cloud/src/storage/layout.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';

describe.each(DATABASES)('migration 0003 on %s', (kind) => {
  let test: TestDatabase;
  let database: Database;
  afterEach(async () => {
    await database?.close();
    await test?.dispose();
  });

  it('builds the rollups of measurements stored before it, as ingest would have kept them', async () => {
    test = testDatabase(kind);
    database = await openDatabase(test.url, { schema: test.schema });
    const { db } = database;
    // Raw rows of two channels, with negative times and bucket boundaries among them.
    const rows = [
      { sensorSeq: 3, ts: -90_000_000, value: 1.5 },
      { sensorSeq: 3, ts: -1, value: -2 },
      { sensorSeq: 3, ts: 0, value: 4 },
      { sensorSeq: 3, ts: 59_999_999, value: 8 },
      { sensorSeq: 3, ts: 3_600_000_000, value: 16 },
      { sensorSeq: 3, ts: 86_400_000_000 + 7, value: 32 },
      { sensorSeq: 17, ts: 30_000_000, value: 5 },
      { sensorSeq: 17, ts: 10_000_000, value: 6 },
    ];
    await db
      .insertInto('measurements')
      .values(
        rows.map((r) => ({
          grp: measurementGroup(r.sensorSeq),
          sensor_seq: r.sensorSeq,
          ts: r.ts,
          value: r.value,
        })),
      )
      .execute();
    // As if the database had been written before 0003: its tables are made again by its statements.
    await sql`DROP TABLE measurement_rollups`.execute(db);
    await sql`DROP TABLE device_moves`.execute(db);
    for (const statement of reads.statements({ dialect: kind, autoIncrementKey: '' }))
      await sql.raw(statement).execute(db);

    const stored = await db
      .selectFrom('measurement_rollups')
      .selectAll()
      .orderBy('grp')
      .orderBy('res')
      .orderBy('bucket')
      .orderBy('sensor_seq')
      .execute();
    const expected = rollupDeltas(rows).map((d) => ({
      grp: rollupGroup(d.sensorSeq),
      res: d.res,
      bucket: d.bucket,
      sensor_seq: d.sensorSeq,
      n: d.n,
      total: d.total,
      lo: d.lo,
      hi: d.hi,
      first_ts: d.firstTs,
      first_value: d.firstValue,
      last_ts: d.lastTs,
      last_value: d.lastValue,
    }));
    expect(stored).toEqual(expected);
  });
});
