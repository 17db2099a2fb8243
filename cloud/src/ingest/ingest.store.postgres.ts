import type pg from 'pg';
import type { RollupDelta } from '../measurements/rollups.ts';
import { advisoryXactLock } from '../storage/advisory-locks.ts';
import { MEASUREMENT_GROUP_SHIFT, ROLLUP_GROUP_SHIFT } from '../storage/layout.ts';
import { creditFirst } from './ingest.types.ts';
import type { FoldTx, IngestDevice, IngestStore, IngestTx, NewSensorRow, SensorRef } from './ingest.types.ts';

/** The advisory lock that makes folds of several processes take turns (ingest.fold.ts). */
const FOLD_LOCK_SQL = advisoryXactLock('fold');

/**
 * Every third element of `points` from `offset` (one column of the (seq, ts, value) triplets), as a
 * PostgreSQL array literal: the driver's own array serialisation, element by element, costs more
 * (docs/design/ingest.md, "Alternatives rejected"). Numbers only (no quoting needed); JavaScript's
 * shortest round-trip form, which `float8in` reads back exactly.
 */
function column(points: Float64Array, offset: number): string {
  const out = new Array<number>(points.length / 3);
  for (let i = 0; i < out.length; i++) out[i] = points[i * 3 + offset]!;
  return `{${out.join(',')}}`;
}

const DEVICE_SQL = `SELECT d.id, d.account_id, d.site_id, d.local_id, d.model, s.vertical, d.token_hash, d.online
  FROM devices d JOIN sites s ON s.id = d.site_id WHERE d.deleted_at IS NULL`;

/**
 * Inserts the (seq, ts, value) columns $1..$3. `skip`: rows whose (channel, ts) is stored are
 * skipped; else the statement fails on the first such row (a plain insert checks the key once, in
 * the index insertion; ON CONFLICT checks it first, a second descent per row: docs/design/ingest.md,
 * "Alternatives rejected").
 */
const insertSql = (skip: boolean) => `WITH ins AS (
  INSERT INTO measurements (grp, sensor_seq, ts, value)
  SELECT s >> ${MEASUREMENT_GROUP_SHIFT}, s, t, v FROM unnest($1::bigint[], $2::bigint[], $3::float8[]) AS u(s, t, v)
  ${skip ? 'ON CONFLICT DO NOTHING ' : ''}RETURNING sensor_seq, ts, value)`;
/** How many of the $4 rows were written, and which (`seq:ts` keys) only when some were not. */
const WRITTEN_SQL = `SELECT n::int AS written, CASE WHEN n < $4 THEN (SELECT array_agg(sensor_seq || ':' || ts) FROM ins) END AS keys
  FROM (SELECT count(*) AS n FROM ins) c`;

/**
 * A whole group's write in one statement (one round trip): the measurements, the journal of those
 * written (big-endian float64 triplets, as `encodeJournal` writes them), the devices ($6..$8) and the
 * online/offline job ($9..$11, when $9 is not null). Data-modifying CTEs all run, once, whether or
 * not the final SELECT reads them.
 *
 * A device row is written only when the group changes what it shows: its online state, or the
 * second of its `last_seen_at` (the API shows whole seconds), so groups of the same second do not
 * queue for the same rows: with every group naming the same devices (a site's gateway, the MQTT
 * bench), they took turns on those row locks until each commit.
 *
 * Groups written at once share device rows, so the rows are locked in id order first (`locked`):
 * an UPDATE ... FROM locks rows in whatever order its plan meets them (a sequential scan: the
 * table's physical order, which every update reshuffles), and two groups that met them in two
 * orders deadlocked (test/cloud/ingest/lock-order.test.ts). FOR NO KEY UPDATE is the lock the
 * UPDATE takes anyway; FOR UPDATE would also wait for every transaction holding a foreign key's
 * share lock on the device (the rule engine's inserts of rows that reference it), and deadlocked with them.
 */
const SECOND = 1_000_000;
const writeSql = (skip: boolean) => `${insertSql(skip)},
journal AS (
  INSERT INTO ingest_journal (points, created_at)
  SELECT string_agg(float8send(sensor_seq::float8) || float8send(ts::float8) || float8send(value), ''::bytea), $5
  FROM ins HAVING count(*) > 0),
devices_seen AS (
  UPDATE devices d SET last_seen_at = GREATEST(COALESCE(d.last_seen_at, 0), u.seen), online = u.online
  FROM (SELECT d2.id FROM devices d2 JOIN unnest($6::text[], $7::bigint[], $8::smallint[]) AS w(id, seen, online)
      ON d2.id = w.id
    WHERE d2.online <> w.online OR d2.last_seen_at IS NULL OR d2.last_seen_at / ${SECOND} < w.seen / ${SECOND}
    ORDER BY d2.id FOR NO KEY UPDATE OF d2) AS locked,
    unnest($6::text[], $7::bigint[], $8::smallint[]) AS u(id, seen, online)
  WHERE d.id = locked.id AND d.id = u.id),
job AS (
  INSERT INTO jobs (id, kind, payload, run_at, attempts, created_at)
  SELECT $9::text, $10::text, $11::text, $5, 0, $5 WHERE $9::text IS NOT NULL)
${WRITTEN_SQL}`;
const WRITE_SQL = writeSql(false);
const WRITE_SKIP_SQL = writeSql(true);
const INSERT_MEASUREMENTS_SQL = `${insertSql(true)} ${WRITTEN_SQL}`;

/** A group's write met rows stored already: the group is written again, skipping them. */
class StoredAlready extends Error {}

/** How long after a group met stored rows the following groups skip them from the start (a resend). */
const SKIP_AFTER_DUPLICATE_MS = 1000;

interface Written {
  written: number;
  keys: string[] | null;
}

function writtenFlags(points: Float64Array, row: Written): Uint8Array {
  const count = points.length / 3;
  if (row.written === count) return new Uint8Array(count).fill(1); // the usual case: no duplicate
  return creditFirst(points, row.keys ?? []);
}

/** A group's unit of work on one client: whether it opened a transaction, and the hits it counted. */
interface Unit {
  client: pg.PoolClient;
  skip: boolean;
  begun: boolean;
  counted: { buckets: string[]; counts: number[]; windowStart: number } | null;
}

/**
 * Adds hits to the per-device counters. On its own (`own`), the statement commits asynchronously
 * (`synchronous_commit` off for its transaction alone, set in the statement so that it costs no
 * round trip): the rows are locked only while it runs, not until the group's commit. Rows in the
 * order given (bucket order), as every writer of them takes them.
 */
const rateSql = (own: boolean) => `INSERT INTO rate_limit_counters (bucket, window_start, count)
  SELECT b, $2::bigint, c FROM unnest($1::text[], $3::int[]) AS u(b, c)
  ${own ? "WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL" : ''}
  ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_limit_counters.count + EXCLUDED.count
  RETURNING bucket, count`;
const RATE_SQL = rateSql(true);
/** Inside a transaction the hits commit with it, as durably as the data. */
const RATE_IN_TX_SQL = rateSql(false);
/** Takes back the hits of a unit that failed (same order, same asynchronous commit). */
const UNCOUNT_SQL = `UPDATE rate_limit_counters r SET count = GREATEST(0, r.count - u.c)
  FROM (SELECT b, c FROM unnest($1::text[], $3::int[]) AS u(b, c)
    WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL) AS u
  WHERE r.bucket = u.b AND r.window_start = $2::bigint`;

/**
 * The ingest unit of work on PostgreSQL: one pooled client, each step one set-based statement over
 * arrays (`unnest`), so a group of hundreds of requests costs a handful of round trips.
 *
 * Only what must be atomic runs in a transaction. The reads (devices) run on their own. The
 * rate-limit counters, one row per device and minute that every group of every replica updates,
 * commit on their own before the data (RATE_SQL): held until the group's commit, those rows made
 * all groups of all replicas take turns, each waiting for the previous one's commit and its fsync
 * (docs/benchmarks/replicas.md). The count stays exact across replicas (each statement adds to the
 * row and answers the sum), and a unit that fails takes its hits back (UNCOUNT_SQL; when even that
 * fails, the database being gone, the device is charged for requests that were refused with a
 * 503). The async commit loses nothing acknowledged: the group's own commit flushes the WAL up to
 * it. The group's write is one statement, atomic on its own; only a group that also creates
 * channels opens a transaction (BEGIN before `insertSensors`, COMMIT after the write). Rows are
 * locked in key order, so concurrent replicas do not deadlock each other.
 */
export class PostgresIngestStore implements IngestStore {
  /**
   * Groups in flight at once: their round trips overlap. Since channels and rollups are folded
   * elsewhere (ingest.fold.ts) and rate-limit counters commit on their own, groups share only
   * device rows, locked in key order. 4 (INGEST_WRITERS' default) is the choice of
   * `BENCH_ONLY=ingest npm run bench` (docs/design/ingest.md, "Alternatives rejected"); more would
   * leave the pool of 10 little room for everything else.
   */
  readonly concurrency: number;

  /** Until when groups are written in the skipping mode from the start (`performance.now()`). */
  private skipUntil = 0;

  constructor(
    private readonly pool: pg.Pool,
    writers = 4,
  ) {
    this.concurrency = writers;
  }

  /**
   * Measurements go in with a plain insert, which fails on a row stored already (a retry, a gateway
   * resending); then the group is written again, skipping such rows, and so are the groups of the
   * next second (a resend comes in bursts).
   */
  async transaction<T>(work: (tx: IngestTx) => Promise<T>): Promise<T> {
    if (performance.now() >= this.skipUntil) {
      try {
        return await this.unit(false, work);
      } catch (err) {
        if (!(err instanceof StoredAlready)) throw err;
        this.skipUntil = performance.now() + SKIP_AFTER_DUPLICATE_MS;
      }
    }
    return this.unit(true, work);
  }

  private async unit<T>(skip: boolean, work: (tx: IngestTx) => Promise<T>): Promise<T> {
    const unit: Unit = { client: await this.pool.connect(), skip, begun: false, counted: null };
    try {
      const result = await work(this.txOn(unit));
      if (unit.begun) await unit.client.query('COMMIT');
      return result;
    } catch (err) {
      if (unit.begun) await unit.client.query('ROLLBACK').catch(() => undefined);
      const counted = unit.counted;
      if (counted) {
        await unit.client
          .query({
            name: 'ingest_uncount',
            text: UNCOUNT_SQL,
            values: [counted.buckets, counted.windowStart, counted.counts],
          })
          .catch(() => undefined);
      }
      throw err;
    } finally {
      unit.client.release();
    }
  }

  /**
   * Folds take turns across processes (an advisory lock for the transaction): two folds updating the
   * same channels and rollups in one order would only queue, but taking turns keeps them from
   * waiting on each other row by row.
   */
  fold<T>(work: (tx: FoldTx) => Promise<T>): Promise<T> {
    return this.on(async (client) => {
      await client.query({
        name: 'fold_lock',
        text: FOLD_LOCK_SQL,
      });
      return work(this.foldTxOn(client));
    });
  }

  private async on<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  private txOn(unit: Unit): IngestTx {
    const { client, skip } = unit;
    const q = async <R extends pg.QueryResultRow>(name: string, text: string, values: unknown[]) =>
      (await client.query<R>({ name, text, values })).rows;
    const begin = async () => {
      if (unit.begun) return;
      await client.query('BEGIN');
      unit.begun = true;
    };
    return {
      devicesByTokenHash: (hashes) =>
        q<IngestDevice>('ingest_dev_hash', `${DEVICE_SQL} AND d.token_hash = ANY($1::text[])`, [hashes]),
      devicesById: (ids) =>
        q<IngestDevice>('ingest_dev_id', `${DEVICE_SQL} AND d.id = ANY($1::text[])`, [ids]),
      addRateHits: async (hits, windowStart) => {
        const sorted = [...hits].sort((a, b) => (a.bucket < b.bucket ? -1 : 1));
        const counted = {
          buckets: sorted.map((h) => h.bucket),
          counts: sorted.map((h) => h.count),
          windowStart,
        };
        // The group's steps count before they write, so no transaction is open here yet.
        const own = !unit.begun;
        const rows = await q<{ bucket: string; count: number }>(
          own ? 'ingest_rate' : 'ingest_rate_tx',
          own ? RATE_SQL : RATE_IN_TX_SQL,
          [counted.buckets, windowStart, counted.counts],
        );
        // Committed now: taken back if the unit fails (a failed statement added nothing).
        if (own) unit.counted = counted;
        return new Map(rows.map((r) => [r.bucket, r.count]));
      },
      findSensors: (keys) =>
        q<SensorRef>(
          'ingest_find_sensors',
          `SELECT s.seq, s.id, s.channel_id, s.device_id, s.kind, s.label_key FROM sensors s
           JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(d, t, l)
             ON s.device_id = k.d AND s.kind = k.t AND s.label_key = k.l`,
          [keys.map((k) => k.deviceId), keys.map((k) => k.kind), keys.map((k) => k.labelKey)],
        ),
      insertSensors: async (rows: NewSensorRow[]) => {
        await begin(); // the channels commit with the group's write, or not at all
        const col = <K extends keyof NewSensorRow>(k: K) => rows.map((r) => r[k]);
        await q(
          'ingest_insert_sensors',
          `INSERT INTO sensors (id, channel_id, account_id, device_id, kind, label, label_key, unit, ok_min, ok_max,
             grace_min, rule_enabled, no_data_min, state, created_at)
           SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
             $8::text[], $9::float8[], $10::float8[], $11::int[], $12::smallint[], $13::int[], $14::text[], $15::bigint[])
           ON CONFLICT (device_id, kind, label_key) DO NOTHING`,
          [
            col('id'),
            col('channel_id'),
            col('account_id'),
            col('device_id'),
            col('kind'),
            col('label'),
            col('label_key'),
            col('unit'),
            col('ok_min'),
            col('ok_max'),
            col('grace_min'),
            col('rule_enabled'),
            col('no_data_min'),
            col('state'),
            col('created_at'),
          ],
        );
      },
      insertMeasurements: async (points) => {
        const [row] = await q<Written>('ingest_insert_measurements', INSERT_MEASUREMENTS_SQL, [
          column(points, 0),
          column(points, 1),
          column(points, 2),
          points.length / 3,
        ]);
        return writtenFlags(points, row!);
      },
      write: async ({ points, at, devices, job }) => {
        const values = [
          column(points, 0),
          column(points, 1),
          column(points, 2),
          points.length / 3,
          at,
          devices.map((r) => r.id),
          devices.map((r) => r.lastSeenAt),
          devices.map((r) => r.online),
          job?.id ?? null,
          job?.kind ?? null,
          job?.payload ?? null,
        ];
        if (skip)
          return writtenFlags(points, (await q<Written>('ingest_write_skip', WRITE_SKIP_SQL, values))[0]!);
        try {
          return writtenFlags(points, (await q<Written>('ingest_write', WRITE_SQL, values))[0]!);
        } catch (err) {
          // 23505: a unique key; the only one this statement can meet is a measurement's (channel, ts).
          throw (err as { code?: unknown }).code === '23505' ? new StoredAlready() : err;
        }
      },
    };
  }

  private foldTxOn(client: pg.PoolClient): FoldTx {
    const q = async <R extends pg.QueryResultRow>(name: string, text: string, values: unknown[]) =>
      (await client.query<R>({ name, text, values })).rows;
    return {
      takeJournal: async (limit) =>
        (
          await q<{ points: Buffer }>(
            'fold_take',
            `DELETE FROM ingest_journal WHERE id IN (SELECT id FROM ingest_journal ORDER BY id LIMIT $1)
             RETURNING points`,
            [limit],
          )
        ).map((r) => r.points),
      upsertRollups: async (deltas) => {
        const col = <K extends keyof RollupDelta>(k: K) => deltas.map((d) => d[k]);
        await q(
          'ingest_rollups',
          `INSERT INTO measurement_rollups AS r
             (grp, res, bucket, sensor_seq, n, total, lo, hi, first_ts, first_value, last_ts, last_value)
           SELECT s >> ${ROLLUP_GROUP_SHIFT}, res, b, s, n, total, lo, hi, fts, fv, lts, lv
           FROM unnest($1::bigint[], $2::int[], $3::bigint[], $4::bigint[], $5::float8[], $6::float8[], $7::float8[],
             $8::bigint[], $9::float8[], $10::bigint[], $11::float8[])
             AS u(s, res, b, n, total, lo, hi, fts, fv, lts, lv)
           ON CONFLICT (grp, res, bucket, sensor_seq) DO UPDATE SET
             n = r.n + EXCLUDED.n, total = r.total + EXCLUDED.total,
             lo = LEAST(r.lo, EXCLUDED.lo), hi = GREATEST(r.hi, EXCLUDED.hi),
             first_value = CASE WHEN EXCLUDED.first_ts < r.first_ts THEN EXCLUDED.first_value ELSE r.first_value END,
             first_ts = LEAST(r.first_ts, EXCLUDED.first_ts),
             last_value = CASE WHEN EXCLUDED.last_ts > r.last_ts THEN EXCLUDED.last_value ELSE r.last_value END,
             last_ts = GREATEST(r.last_ts, EXCLUDED.last_ts)`,
          [
            col('sensorSeq'),
            col('res'),
            col('bucket'),
            col('n'),
            col('total'),
            col('lo'),
            col('hi'),
            col('firstTs'),
            col('firstValue'),
            col('lastTs'),
            col('lastValue'),
          ],
        );
      },
      updateSensorLast: async (rows) => {
        await q(
          'ingest_sensor_last',
          // Every channel written is marked for the rule engine; the last value moves only forward.
          // The rows are locked in seq order first (`locked`), as the rule engine locks them: an
          // UPDATE ... FROM takes them in its plan's order, which deadlocks with a writer taking them in another.
          `UPDATE sensors s SET
             last_value = CASE WHEN s.last_ts IS NULL OR s.last_ts <= u.ts THEN u.value ELSE s.last_value END,
             last_ts = CASE WHEN s.last_ts IS NULL OR s.last_ts <= u.ts THEN u.ts ELSE s.last_ts END,
             eval_from = LEAST(COALESCE(s.eval_from, u.min_ts), u.min_ts),
             eval_gen = s.eval_gen + 1
           FROM (SELECT seq FROM sensors WHERE seq = ANY($1::bigint[]) ORDER BY seq FOR NO KEY UPDATE) AS locked,
             unnest($1::bigint[], $2::bigint[], $3::float8[], $4::bigint[]) AS u(seq, ts, value, min_ts)
           WHERE s.seq = locked.seq AND s.seq = u.seq`,
          [
            rows.map((r) => r.sensorSeq),
            rows.map((r) => r.ts),
            rows.map((r) => r.value),
            rows.map((r) => r.minTs),
          ],
        );
      },
    };
  }
}
