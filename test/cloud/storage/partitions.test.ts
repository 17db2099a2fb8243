import { afterEach, describe, expect, it } from '@jest/globals';
import { sql } from 'kysely';
import { createLogger } from '../../../cloud/src/logger.ts';
import { openDatabase, type Database } from '../../../cloud/src/storage/database.ts';
import { ensureMeasurementPartitions, partitionName } from '../../../cloud/src/storage/partitions.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';

const log = createLogger('silent');
const micros = (iso: string) => Date.parse(iso) * 1000;

describe.each(DATABASES)('measurement partitions on %s', (kind) => {
  let td: TestDatabase;
  let database: Database;
  afterEach(async () => {
    await database?.close();
    await td?.dispose();
  });

  async function open() {
    td = testDatabase(kind);
    database = await openDatabase(td.url, { schema: td.schema });
  }

  async function where(ts: number): Promise<string> {
    const r = await sql<{
      part: string;
    }>`SELECT tableoid::regclass::text AS part FROM measurements WHERE ts = ${ts}`.execute(database.db);
    return r.rows[0]!.part.replace(/^.*\./, '');
  }

  it('creates the months around now, moves rows out of the default partition, and is idempotent', async () => {
    await open();
    const old = micros('2026-03-10T00:00:00Z');
    await database.db
      .insertInto('measurements')
      .values({ grp: 0, sensor_seq: 1, ts: old, value: 4 })
      .execute();
    const created = await ensureMeasurementPartitions(database, micros('2026-04-15T12:00:00Z'), log);
    if (kind === 'sqlite') {
      expect(created).toEqual([]);
      return;
    }
    expect(created).toEqual([
      partitionName(2026, 2),
      partitionName(2026, 3),
      partitionName(2026, 4),
      partitionName(2026, 5),
    ]);
    expect(await where(old)).toBe('measurements_y2026m03');
    const next = micros('2026-05-31T23:59:59.999999Z');
    await database.db
      .insertInto('measurements')
      .values({ grp: 0, sensor_seq: 1, ts: next, value: 5 })
      .execute();
    expect(await where(next)).toBe('measurements_y2026m05');
    const far = micros('2030-01-01T00:00:00Z');
    await database.db
      .insertInto('measurements')
      .values({ grp: 0, sensor_seq: 1, ts: far, value: 6 })
      .execute();
    expect(await where(far)).toBe('measurements_default');
    expect(await ensureMeasurementPartitions(database, micros('2026-04-15T12:00:00Z'), log)).toEqual([]);
    // the primary key (the dedup rule) holds inside a partition
    await expect(
      database.db.insertInto('measurements').values({ grp: 0, sensor_seq: 1, ts: old, value: 9 }).execute(),
    ).rejects.toMatchObject({ code: '23505' });
  });
});
