import type { ValidMeasurement } from '../../../shared/ingest.ts';
import type { ApiError } from '../errors.ts';
import type { DevicePrincipal } from '../http/context.ts';
import type { Tables } from '../storage/schema.ts';
import type { RollupDelta } from '../measurements/rollups.ts';

/**
 * One ingest request as every protocol adapter hands it to the IngestCore: credentials, the device
 * it names, its validated measurements, and any validation error, which is only reported once
 * authentication and the rate limit have been applied (docs/api.md: 401, 403, then 400/422).
 */
export interface IngestItem {
  /** A device token's hash (checked in the unit of work), or a device the caller already authenticated. */
  credential: { kind: 'token'; tokenHash: string | null } | { kind: 'device'; principal: DevicePrincipal };
  /** Whether this request still counts against the device's rate limit (false when the pipeline counted it). */
  countRate: boolean;
  /** The device the request names (`local_id` or `dev_` id); null = the token's own device. */
  deviceRef: string | null;
  /** Server receive time, microseconds. */
  receivedAt: number;
  /** Measurement time, microseconds; null = receivedAt. */
  ts: number | null;
  measurements: ValidMeasurement[];
  /** Shelly battery value whose unit depends on the device model. */
  shellyBattery?: number | null;
  /** Last-will state carried by the request. */
  lwt?: 'online' | 'offline' | null;
  /** The request was authenticated but its content is invalid. */
  error: ApiError | null;
  /** Which way in sent it (the metrics' label); unnamed items count as `http`. */
  way?: IngestWay;
}

/** The ways in, as `GET /metrics` labels them. */
export type IngestWay = 'http' | 'shelly' | 'mqtt' | 'ttn' | 'chirpstack';

/** Counts what ingest accepts and refuses (the Prometheus counters); called once per committed group. */
export interface IngestObserver {
  accepted(way: IngestWay, measurements: number): void;
  rejected(way: IngestWay, code: string, measurements: number): void;
  /** A group committed: the requests and messages it held, and how long its transaction took. */
  committed(items: number, seconds: number): void;
}

/**
 * The ingest core as its users see it (the MQTT bridge, HTTP handlers, readers of derived state).
 * `submit` resolves once the item's group is committed.
 */
export interface Ingest {
  submit(item: IngestItem): Promise<IngestOutcome>;
  /**
   * Whether ingest is over capacity now (admission control): the ways in whose senders retry refuse
   * new work meanwhile (503 `overloaded`, PUBACK 0x97) and count it with `shed`.
   */
  overloaded(): boolean;
  /** Counts one request refused because ingest was overloaded. */
  shed(item: Pick<IngestItem, 'way' | 'measurements'>): void;
  /** Called with the number of measurements each group wrote, after it committed. */
  onAccepted(listener: (accepted: number) => void | Promise<void>): void;
  /** Called after commit with the devices a group flipped online or offline. */
  onDeviceState(listener: (changes: DeviceStateChange[]) => void | Promise<void>): void;
  /** Called after each fold commits with the channel seqs whose last value it merged. */
  onFolded(listener: (seqs: number[]) => void | Promise<void>): void;
  /** Resolves once state derived from everything ingested so far is up to date (ingest.fold.ts). */
  catchUp(): Promise<void>;
  /** After the last submit: folds what is left and releases what the core holds. */
  stop(): Promise<void>;
}

export interface ResolvedChannel {
  type: string;
  label: string | null;
  channel_id: string;
}

export interface RateInfo {
  limit: number;
  remaining: number;
  resetAt: number;
}

export type IngestOutcome =
  | {
      ok: true;
      deviceId: string;
      accountId: string;
      accepted: number;
      deduplicated: number;
      channels: ResolvedChannel[];
      /** `channels` as JSON, from per-channel pieces made once (an answer's largest part). */
      channelsJson: string;
      rate: RateInfo | null;
    }
  | { ok: false; error: ApiError; rate: RateInfo | null };

/** The device row ingest needs, with its site's vertical (for the defaults of new channels). */
export interface IngestDevice {
  id: string;
  account_id: string;
  site_id: string;
  local_id: string;
  model: string;
  vertical: string;
  token_hash: string | null;
  /** 0/1 before this group: the group tells `onDeviceState` listeners when it flips. */
  online: number;
}

/** A device that went online or offline (an accepted uplink, or a last-will `lwt`). */
export interface DeviceStateChange {
  accountId: string;
  deviceId: string;
  siteId: string;
  localId: string;
  online: boolean;
  /** Server time of the request that flipped it, microseconds. */
  at: number;
}

export interface SensorRef {
  seq: number;
  id: string;
  channel_id: string;
  device_id: string;
  kind: string;
  label_key: string;
}

/** A channel as ingest creates it: every column but the generated key and the last value. */
export type NewSensorRow = Omit<Tables['sensors'], 'seq' | 'last_value' | 'last_ts' | 'state'> & {
  state: 'no_data';
};

export interface MeasurementRow {
  sensorSeq: number;
  ts: number;
  value: number;
}

/** A channel's newest point among those folded, and the oldest time folded (the rule engine's marker). */
export interface SensorLastRow extends MeasurementRow {
  minTs: number;
}

/**
 * The data access of one ingest unit of work, implemented once per database
 * (`ingest.store.sqlite.ts`, `ingest.store.postgres.ts`). All calls run inside one transaction.
 */
export interface IngestTx {
  devicesByTokenHash(hashes: string[]): Promise<IngestDevice[]> | IngestDevice[];
  devicesById(ids: string[]): Promise<IngestDevice[]> | IngestDevice[];
  /** Adds `count` hits to each bucket's window; returns the counts after. */
  addRateHits(
    hits: { bucket: string; count: number }[],
    windowStart: number,
  ): Promise<Map<string, number>> | Map<string, number>;
  findSensors(
    keys: { deviceId: string; kind: string; labelKey: string }[],
  ): Promise<SensorRef[]> | SensorRef[];
  /** Inserts, skipping rows whose (device, kind, label) exists already. */
  insertSensors(rows: NewSensorRow[]): Promise<void> | void;
  /**
   * Writes a group: inserts the (seq, ts, value) triplets, skipping (channel, ts) that exist (the
   * first of two equal keys in one call wins); adds the points written to the journal
   * (`ingest.fold.ts`); moves the devices' `last_seen_at` and `online` (rows in id order); enqueues
   * `job` (jobs/job-queue.ts) when given. Says for each point whether it was written (1) or a
   * duplicate (0). One call, so that PostgreSQL does it in one round trip.
   */
  write(group: IngestWrite): Promise<Uint8Array> | Uint8Array;
  /**
   * Inserts points as `write` does, without the journal: for loading data whose derived state is
   * made separately (benchmarks).
   */
  insertMeasurements(points: Float64Array): Promise<Uint8Array> | Uint8Array;
}

export interface IngestWrite {
  points: Float64Array;
  at: number;
  devices: { id: string; lastSeenAt: number; online: number }[];
  job: { id: string; kind: string; payload: string; at: number } | null;
}

/** The data access of one fold (`ingest.fold.ts`), in one transaction. */
export interface FoldTx {
  /** Removes up to `limit` journal rows, oldest first, and answers their payloads. */
  takeJournal(limit: number): Promise<Uint8Array[]> | Uint8Array[];
  /**
   * Merges each delta into its rollup row (count and sum add up, min/max widen, first/last move only
   * to an earlier/later ts). One delta per (channel, level, bucket), in key order.
   */
  upsertRollups(deltas: RollupDelta[]): Promise<void> | void;
  /**
   * Moves each sensor's last value forward (never back), and marks the channel for the rule engine
   * from `minTs`, the oldest time folded for it (`sensors.eval_from`, `eval_gen`). In seq order.
   */
  updateSensorLast(rows: SensorLastRow[]): Promise<void> | void;
}

export interface IngestStore {
  /**
   * How many groups may be written at once. PostgreSQL overlaps one group's round trips with
   * another's (rows are locked in key order, so they cannot deadlock each other); SQLite has one
   * writer, so 1.
   */
  readonly concurrency?: number;
  /**
   * Runs `work` as one unit: what it writes is stored all or nothing; when it throws, nothing it
   * wrote stays, rate-limit hits included. The rate-limit hits may commit on their own, ahead of
   * the data (PostgreSQL: ingest.store.postgres.ts); a failed unit then takes them back.
   */
  transaction<T>(work: (tx: IngestTx) => Promise<T>): Promise<T>;
  /** Runs one fold in one transaction, one at a time across processes. */
  fold<T>(work: (tx: FoldTx) => Promise<T>): Promise<T>;
}

/**
 * Which rows of an insert were written, from the `seq:ts` keys the database returned: a key is
 * credited to the first row that carried it; later rows with the same (channel, ts) are duplicates.
 */
export function creditFirst(points: Float64Array, insertedKeys: Iterable<string>): Uint8Array {
  const count = points.length / 3;
  const written = new Uint8Array(count);
  const fresh = new Set(insertedKeys);
  for (let i = 0; i < count; i++) written[i] = fresh.delete(`${points[i * 3]}:${points[i * 3 + 1]}`) ? 1 : 0;
  return written;
}

/** The points of `points` that were written, by `written` (1 written, 0 a duplicate). */
export function writtenPoints(points: Float64Array, written: Uint8Array): Float64Array {
  let fresh = 0;
  for (let r = 0; r < written.length; r++) fresh += written[r]!;
  if (fresh === written.length) return points;
  const out = new Float64Array(fresh * 3);
  for (let r = 0, j = 0; r < written.length; r++) {
    if (!written[r]) continue;
    out.set(points.subarray(r * 3, r * 3 + 3), j * 3);
    j++;
  }
  return out;
}
