import type BetterSqlite3 from 'better-sqlite3';
import { measurementGroup, rollupGroup } from '../storage/layout.ts';
import type { RollupDelta } from '../measurements/rollups.ts';
import type { Db } from '../storage/database.ts';
import { encodeJournal } from './ingest.fold.ts';
import { writtenPoints } from './ingest.types.ts';
import type { FoldTx, IngestDevice, IngestStore, IngestTx, NewSensorRow, SensorRef } from './ingest.types.ts';

/** Rollups per INSERT statement (12 parameters each, well under SQLite's limit of 32766). */
const CHUNK = 128;
/**
 * Measurement rows per INSERT statement (a full request): less CPU per row than one statement per
 * row (docs/design/ingest.md, "Alternatives rejected").
 */
const ROWS_PER_INSERT = 32;

const ROLLUP_INSERT = `INSERT INTO measurement_rollups
  (grp, res, bucket, sensor_seq, n, total, lo, hi, first_ts, first_value, last_ts, last_value)`;
/** Right-hand sides see the row as it was, so first/last compare against the old first_ts/last_ts. */
const ROLLUP_MERGE = `ON CONFLICT (grp, res, bucket, sensor_seq) DO UPDATE SET
  n = n + excluded.n, total = total + excluded.total, lo = MIN(lo, excluded.lo), hi = MAX(hi, excluded.hi),
  first_value = CASE WHEN excluded.first_ts < first_ts THEN excluded.first_value ELSE first_value END,
  first_ts = MIN(first_ts, excluded.first_ts),
  last_value = CASE WHEN excluded.last_ts > last_ts THEN excluded.last_value ELSE last_value END,
  last_ts = MAX(last_ts, excluded.last_ts)`;

/**
 * The ingest unit of work on SQLite: prepared statements on the raw better-sqlite3 handle inside
 * one `BEGIN IMMEDIATE` transaction. The Kysely connection is held for its duration, so no other
 * query of this process can slip in between.
 */
export class SqliteIngestStore implements IngestStore {
  private readonly tx: IngestTx;
  private readonly foldTx: FoldTx;

  constructor(
    private readonly db: Db,
    private readonly sqlite: BetterSqlite3.Database,
  ) {
    const deviceSql = `SELECT d.id, d.account_id, d.site_id, d.local_id, d.model, s.vertical, d.token_hash, d.online
      FROM devices d JOIN sites s ON s.id = d.site_id WHERE d.deleted_at IS NULL AND `;
    const byHash = sqlite.prepare<[string], IngestDevice>(`${deviceSql} d.token_hash = ?`);
    const byId = sqlite.prepare<[string], IngestDevice>(`${deviceSql} d.id = ?`);
    const addHits = sqlite.prepare<[string, number, number], { count: number }>(
      `INSERT INTO rate_limit_counters (bucket, window_start, count) VALUES (?, ?, ?)
       ON CONFLICT (bucket, window_start) DO UPDATE SET count = count + excluded.count RETURNING count`,
    );
    const findSensor = sqlite.prepare<[string, string, string], SensorRef>(
      `SELECT seq, id, channel_id, device_id, kind, label_key FROM sensors
       WHERE device_id = ? AND kind = ? AND label_key = ?`,
    );
    const insertSensor = sqlite.prepare<NewSensorRow>(
      `INSERT INTO sensors (id, channel_id, account_id, device_id, kind, label, label_key, unit, ok_min, ok_max,
         grace_min, rule_enabled, no_data_min, state, created_at)
       VALUES (@id, @channel_id, @account_id, @device_id, @kind, @label, @label_key, @unit, @ok_min, @ok_max,
         @grace_min, @rule_enabled, @no_data_min, @state, @created_at)
       ON CONFLICT (device_id, kind, label_key) DO NOTHING`,
    );
    // Rows go in statements of up to ROWS_PER_INSERT rows: cheaper per row than one statement
    // each. A statement's `changes` cannot say which of its rows were duplicates, so when the total
    // falls short the group's rows are inserted again one by one, whose `changes` can (below).
    const insertMany = new Map<number, BetterSqlite3.Statement<number[]>>();
    const insertStatement = (rows: number) => {
      let statement = insertMany.get(rows);
      if (!statement) {
        const values = Array.from({ length: rows }, () => '(?, ?, ?, ?)').join(', ');
        statement = sqlite.prepare(
          `INSERT INTO measurements (grp, sensor_seq, ts, value) VALUES ${values} ON CONFLICT DO NOTHING`,
        );
        insertMany.set(rows, statement);
      }
      return statement;
    };
    const insertOne = insertStatement(1);
    const params = new Array<number>(ROWS_PER_INSERT * 4);
    const appendJournal = sqlite.prepare<[Buffer, number]>(
      `INSERT INTO ingest_journal (points, created_at) VALUES (?, ?)`,
    );
    const takeJournal = sqlite.prepare<[number], { points: Buffer }>(
      `DELETE FROM ingest_journal WHERE id IN (SELECT id FROM ingest_journal ORDER BY id LIMIT ?) RETURNING points`,
    );
    const rollupChunk = new Map<number, BetterSqlite3.Statement<number[]>>();
    const rollupStatement = (n: number) => {
      let statement = rollupChunk.get(n);
      if (!statement) {
        const values = Array.from({ length: n }, () => '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ');
        statement = sqlite.prepare(`${ROLLUP_INSERT} VALUES ${values} ${ROLLUP_MERGE}`);
        rollupChunk.set(n, statement);
      }
      return statement;
    };
    // Every channel folded is marked for the rule engine (eval_from, eval_gen); the last value moves
    // only forward.
    const updateSensors = sqlite.prepare<[string]>(
      `UPDATE sensors SET
         last_value = CASE WHEN last_ts IS NULL OR last_ts <= u.value ->> 1 THEN u.value ->> 2 ELSE last_value END,
         last_ts = CASE WHEN last_ts IS NULL OR last_ts <= u.value ->> 1 THEN u.value ->> 1 ELSE last_ts END,
         eval_from = MIN(COALESCE(eval_from, u.value ->> 3), u.value ->> 3),
         eval_gen = eval_gen + 1
       FROM json_each(?) AS u
       WHERE sensors.seq = u.value ->> 0`,
    );
    // As on PostgreSQL: a device row is written when its online state or the second of its
    // `last_seen_at` (the API shows whole seconds) changes.
    const updateDevice = sqlite.prepare<{ seen: number; online: number; id: string }>(
      `UPDATE devices SET last_seen_at = MAX(COALESCE(last_seen_at, 0), @seen), online = @online
       WHERE id = @id
         AND (online <> @online OR last_seen_at IS NULL OR last_seen_at / 1000000 < CAST(@seen AS INTEGER) / 1000000)`,
    );
    const insertJob = sqlite.prepare<[string, string, string, number, number]>(
      `INSERT INTO jobs (id, kind, payload, run_at, attempts, created_at) VALUES (?, ?, ?, ?, 0, ?)`,
    );
    const insertMeasurements = (points: Float64Array): Uint8Array => {
      const count = points.length / 3;
      const written = new Uint8Array(count);
      if (count === 0) return written;
      sqlite.exec('SAVEPOINT ingest_rows');
      let changes = 0;
      for (let start = 0; start < count; start += ROWS_PER_INSERT) {
        const rows = Math.min(ROWS_PER_INSERT, count - start);
        const args = rows === ROWS_PER_INSERT ? params : new Array<number>(rows * 4);
        for (let r = 0; r < rows; r++) {
          const seq = points[(start + r) * 3]!;
          args[r * 4] = measurementGroup(seq);
          args[r * 4 + 1] = seq;
          args[r * 4 + 2] = points[(start + r) * 3 + 1]!;
          args[r * 4 + 3] = points[(start + r) * 3 + 2]!;
        }
        changes += insertStatement(rows).run(...args).changes;
      }
      if (changes === count) {
        sqlite.exec('RELEASE ingest_rows');
        return written.fill(1); // the usual case: nothing was a duplicate
      }
      // Some rows were already stored (a retry, a gateway resending): which ones, row by row.
      sqlite.exec('ROLLBACK TO ingest_rows');
      for (let i = 0; i < count; i++) {
        const seq = points[i * 3]!;
        written[i] = insertOne.run(
          measurementGroup(seq),
          seq,
          points[i * 3 + 1]!,
          points[i * 3 + 2]!,
        ).changes;
      }
      sqlite.exec('RELEASE ingest_rows');
      return written;
    };
    this.tx = {
      devicesByTokenHash: (hashes) => hashes.flatMap((h) => byHash.all(h)),
      devicesById: (ids) => ids.flatMap((id) => byId.all(id)),
      addRateHits: (hits, windowStart) =>
        new Map(hits.map((h) => [h.bucket, addHits.get(h.bucket, windowStart, h.count)!.count])),
      findSensors: (keys) => keys.flatMap((k) => findSensor.all(k.deviceId, k.kind, k.labelKey)),
      insertSensors: (rows) => {
        for (const row of rows) insertSensor.run(row);
      },
      insertMeasurements,
      write: ({ points, at, devices, job }) => {
        const written = insertMeasurements(points);
        const journal = writtenPoints(points, written);
        if (journal.length > 0) appendJournal.run(encodeJournal(journal), at);
        for (const r of devices) updateDevice.run({ seen: r.lastSeenAt, online: r.online, id: r.id });
        if (job) insertJob.run(job.id, job.kind, job.payload, job.at, job.at);
        return written;
      },
    };
    this.foldTx = {
      takeJournal: (limit) => takeJournal.all(limit).map((r) => r.points),
      upsertRollups: (deltas: RollupDelta[]) => {
        for (let start = 0; start < deltas.length; start += CHUNK) {
          const chunk = deltas.slice(start, start + CHUNK);
          const params: number[] = [];
          for (const d of chunk) {
            params.push(rollupGroup(d.sensorSeq), d.res, d.bucket, d.sensorSeq, d.n, d.total, d.lo, d.hi);
            params.push(d.firstTs, d.firstValue, d.lastTs, d.lastValue);
          }
          rollupStatement(chunk.length).run(...params);
        }
      },
      updateSensorLast: (rows) => {
        updateSensors.run(JSON.stringify(rows.map((r) => [r.sensorSeq, r.ts, r.value, r.minTs])));
      },
    };
  }

  transaction<T>(work: (tx: IngestTx) => Promise<T>): Promise<T> {
    return this.immediate(() => work(this.tx));
  }

  /** Folds are serialised with everything else by the one connection (and across processes by SQLite's lock). */
  fold<T>(work: (tx: FoldTx) => Promise<T>): Promise<T> {
    return this.immediate(() => work(this.foldTx));
  }

  private immediate<T>(work: () => Promise<T>): Promise<T> {
    return this.db.connection().execute(async () => {
      this.sqlite.exec('BEGIN IMMEDIATE');
      try {
        const result = await work();
        this.sqlite.exec('COMMIT');
        return result;
      } catch (err) {
        if (this.sqlite.inTransaction) this.sqlite.exec('ROLLBACK');
        throw err;
      }
    });
  }
}
