import { sql } from 'kysely';
import type { Logger } from '../logger.ts';
import type { Database } from './database.ts';

/**
 * PostgreSQL keeps measurements in one partition per calendar month (UTC), so retention and
 * vacuum work month by month and a range read touches only the months it covers. Rows whose month
 * has no partition yet land in `measurements_default`; `ensureMeasurementPartitions` creates the
 * months around now and moves any such rows into their month's partition. SQLite has one table.
 */
export function monthStartMicros(year: number, month0: number): number {
  return Date.UTC(year, month0, 1) * 1000;
}

export function partitionName(year: number, month0: number): string {
  return `measurements_y${year}m${String(month0 + 1).padStart(2, '0')}`;
}

/** Creates partitions from `monthsBack` months before `nowMicros` to `monthsAhead` after. Idempotent. */
export async function ensureMeasurementPartitions(
  database: Database,
  nowMicros: number,
  log: Logger,
  monthsBack = 1,
  monthsAhead = 2,
): Promise<string[]> {
  if (database.dialect !== 'postgres') return [];
  const now = new Date(nowMicros / 1000);
  const created: string[] = [];
  for (let offset = -monthsBack; offset <= monthsAhead; offset++) {
    const first = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + offset, 1));
    const year = first.getUTCFullYear();
    const month0 = first.getUTCMonth();
    if (await createMonth(database, year, month0)) created.push(partitionName(year, month0));
  }
  if (created.length) log.info({ partitions: created }, 'measurement partitions created');
  return created;
}

/** Creates one month's partition (moving its rows out of the default partition); false when it exists. */
export async function createMonth(database: Database, year: number, month0: number): Promise<boolean> {
  const name = partitionName(year, month0);
  const from = monthStartMicros(year, month0);
  const to = monthStartMicros(year, month0 + 1);
  return database.db.transaction().execute(async (trx) => {
    // One maintainer at a time across replicas.
    await sql`SELECT pg_advisory_xact_lock(7335002)`.execute(trx);
    const exists = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_class
      WHERE relname = ${name} AND relnamespace = current_schema()::regnamespace`.execute(trx);
    if (exists.rows[0]!.n > 0) return false;
    await sql
      .raw(`CREATE TABLE ${name} (LIKE measurements INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`)
      .execute(trx);
    await sql
      .raw(`INSERT INTO ${name} SELECT * FROM measurements_default WHERE ts >= ${from} AND ts < ${to}`)
      .execute(trx);
    await sql.raw(`DELETE FROM measurements_default WHERE ts >= ${from} AND ts < ${to}`).execute(trx);
    await sql
      .raw(`ALTER TABLE measurements ATTACH PARTITION ${name} FOR VALUES FROM (${from}) TO (${to})`)
      .execute(trx);
    return true;
  });
}
