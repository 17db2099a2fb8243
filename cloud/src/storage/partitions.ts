import { sql } from 'kysely';
import type { Logger } from '../logger.ts';
import { advisoryXactLock } from './advisory-locks.ts';
import type { Database } from './database.ts';

/** The advisory lock of partition maintenance: one maintainer at a time across replicas. */
const PARTITION_LOCK = 'partitions';

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
    await sql.raw(advisoryXactLock(PARTITION_LOCK)).execute(trx);
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

/** How long dropping a month may wait for the table lock before giving up until the next run. */
const DROP_LOCK_TIMEOUT = '5s';

/**
 * Drops the measurement months that end at or before `cutoff`, whole: detaching and dropping a
 * partition frees its pages at once, where deleting its rows leaves dead tuples for vacuum and
 * writes every row to the WAL. Answers the partitions dropped. Rows before the cutoff that remain
 * (the month at the boundary, the default partition) are the row-wise delete's. SQLite has one
 * table, so nothing is dropped there and the row-wise delete does all the work.
 *
 * Detaching takes the parent table's lock for a moment; `lock_timeout` keeps a long read from making
 * ingest queue behind the waiting detach, and a month not dropped now is dropped at the next run.
 */
export async function dropMeasurementMonthsBefore(
  database: Database,
  cutoff: number,
  log: Logger,
): Promise<string[]> {
  if (database.dialect !== 'postgres') return [];
  const parts = await sql<{ name: string }>`SELECT c.relname AS name FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    JOIN pg_class p ON p.oid = i.inhparent
    WHERE p.relname = 'measurements' AND p.relnamespace = current_schema()::regnamespace`.execute(
    database.db,
  );
  const due = parts.rows
    .map((r) => ({ name: r.name, m: /^measurements_y(\d{4})m(\d{2})$/.exec(r.name) }))
    .filter((p) => p.m !== null && monthStartMicros(Number(p.m[1]), Number(p.m[2])) <= cutoff)
    .map((p) => p.name)
    .sort();
  const dropped: string[] = [];
  for (const name of due) {
    try {
      await database.db.transaction().execute(async (trx) => {
        // One maintainer at a time across replicas (the lock `createMonth` takes).
        await sql.raw(advisoryXactLock(PARTITION_LOCK)).execute(trx);
        const still = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_class
          WHERE relname = ${name} AND relnamespace = current_schema()::regnamespace`.execute(trx);
        if (still.rows[0]!.n === 0) return; // another replica dropped it meanwhile
        await sql.raw(`SET LOCAL lock_timeout = '${DROP_LOCK_TIMEOUT}'`).execute(trx);
        await sql.raw(`ALTER TABLE measurements DETACH PARTITION ${name}`).execute(trx);
        await sql.raw(`DROP TABLE ${name}`).execute(trx);
      });
      dropped.push(name);
    } catch (err) {
      log.warn({ err, partition: name }, 'measurement month not dropped; retried at the next run');
    }
  }
  if (dropped.length) log.info({ partitions: dropped }, 'measurement months dropped by retention');
  return dropped;
}
