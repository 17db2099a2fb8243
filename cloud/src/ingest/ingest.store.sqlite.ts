import type BetterSqlite3 from 'better-sqlite3';
import type { Db } from '../storage/database.ts';
import type {
  IngestDevice,
  IngestStore,
  IngestTx,
  MeasurementRow,
  NewSensorRow,
  SensorRef,
} from './ingest.types.ts';

/**
 * The ingest unit of work on SQLite: prepared statements on the raw better-sqlite3 handle inside
 * one `BEGIN IMMEDIATE` transaction. The Kysely connection is held for its duration, so no other
 * query of this process can slip in between.
 */
export class SqliteIngestStore implements IngestStore {
  private readonly tx: IngestTx;

  constructor(
    private readonly db: Db,
    private readonly sqlite: BetterSqlite3.Database,
  ) {
    const deviceSql = `SELECT d.id, d.account_id, d.site_id, d.local_id, d.model, s.vertical, d.token_hash
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
    const insertMeasurement = sqlite.prepare<[number, number, number]>(
      `INSERT INTO measurements (sensor_seq, ts, value) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
    );
    const updateSensor = sqlite.prepare<[number, number, number, number]>(
      `UPDATE sensors SET last_value = ?, last_ts = ? WHERE seq = ? AND (last_ts IS NULL OR last_ts <= ?)`,
    );
    const updateDevice = sqlite.prepare<[number, number, string]>(
      `UPDATE devices SET last_seen_at = MAX(COALESCE(last_seen_at, 0), ?), online = ? WHERE id = ?`,
    );
    this.tx = {
      devicesByTokenHash: (hashes) => hashes.flatMap((h) => byHash.all(h)),
      devicesById: (ids) => ids.flatMap((id) => byId.all(id)),
      addRateHits: (hits, windowStart) =>
        new Map(hits.map((h) => [h.bucket, addHits.get(h.bucket, windowStart, h.count)!.count])),
      findSensors: (keys) => keys.flatMap((k) => findSensor.all(k.deviceId, k.kind, k.labelKey)),
      insertSensors: (rows) => {
        for (const row of rows) insertSensor.run(row);
      },
      insertMeasurements: (rows: MeasurementRow[]) =>
        rows.map((r) => insertMeasurement.run(r.sensorSeq, r.ts, r.value).changes === 1),
      updateSensorLast: (rows) => {
        for (const r of rows) updateSensor.run(r.value, r.ts, r.sensorSeq, r.ts);
      },
      updateDevices: (rows) => {
        for (const r of rows) updateDevice.run(r.lastSeenAt, r.online, r.id);
      },
    };
  }

  async transaction<T>(work: (tx: IngestTx) => Promise<T>): Promise<T> {
    return this.db.connection().execute(async () => {
      this.sqlite.exec('BEGIN IMMEDIATE');
      try {
        const result = await work(this.tx);
        this.sqlite.exec('COMMIT');
        return result;
      } catch (err) {
        if (this.sqlite.inTransaction) this.sqlite.exec('ROLLBACK');
        throw err;
      }
    });
  }
}
