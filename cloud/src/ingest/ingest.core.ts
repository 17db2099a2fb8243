import { IngestValidationError, type ValidMeasurement } from '../../../shared/ingest.ts';
import { newId } from '../../../shared/ids.ts';
import type { MeasurementKind } from '../../../shared/kinds.ts';
import { shellyBatteryMeasurement } from '../../../shared/shelly.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import {
  ApiError,
  Forbidden,
  InvalidRequest,
  RateLimited,
  Unauthenticated,
  Unprocessable,
} from '../errors.ts';
import { findModel } from '../devices/models.ts';
import { JournalFolder } from './ingest.fold.ts';
import type { Logger } from '../logger.ts';
import { defaultRule, isVertical } from '../sites/verticals.ts';
import type {
  DeviceStateChange,
  Ingest,
  IngestDevice,
  IngestItem,
  IngestOutcome,
  IngestStore,
  IngestTx,
  NewSensorRow,
  RateInfo,
  ResolvedChannel,
  SensorRef,
} from './ingest.types.ts';

const MAX_BATCH = 500;
/** The job that turns a group's online/offline flips into webhooks (payload: DeviceStateChange[]). */
export const DEVICE_STATE_JOB = 'device_state';
const SENSOR_CACHE_LIMIT = 100_000;
const RATE_WINDOW_SECONDS = 60;
const DEFAULT_NO_DATA_MIN = 60;

/** Receives how many measurements a group wrote. */
export type AcceptedListener = (accepted: number) => void | Promise<void>;
export type DeviceStateListener = (changes: DeviceStateChange[]) => void | Promise<void>;

interface Pending {
  item: IngestItem;
  resolve: (outcome: IngestOutcome) => void;
  reject: (err: unknown) => void;
}

export function toApiError(err: IngestValidationError): ApiError {
  const details = [{ path: err.path, message: err.message }];
  return err.status === 422
    ? new Unprocessable(err.code, err.message, details)
    : new InvalidRequest(err.code, err.message, details);
}

/** A channel's key within its device: (kind, label). */
function channelKey(kind: string, labelKey: string): string {
  return labelKey === '' ? kind : `${kind}\u0000${labelKey}`;
}

/**
 * A channel as answers list it, and its JSON: both made once per channel and kept while the channel
 * is (serialising the channel list anew per answer is costly: docs/design/ingest.md).
 */
const answerChannels = new WeakMap<SensorRef, { channel: ResolvedChannel; json: string }>();

function answerChannel(s: SensorRef): { channel: ResolvedChannel; json: string } {
  let entry = answerChannels.get(s);
  if (!entry) {
    // The label as sent: channels are matched on it, and no label is stored as ''.
    const channel = {
      type: s.kind,
      label: s.label_key === '' ? null : s.label_key,
      channel_id: s.channel_id,
    };
    entry = { channel, json: JSON.stringify(channel) };
    answerChannels.set(s, entry);
  }
  return entry;
}

/** Channels by device, then by (kind, label): the device's map is found once per request. */
class ChannelCache {
  private readonly byDevice = new Map<string, Map<string, SensorRef>>();
  private size = 0;

  device(deviceId: string): Map<string, SensorRef> | undefined {
    return this.byDevice.get(deviceId);
  }

  add(s: SensorRef): void {
    if (this.size >= SENSOR_CACHE_LIMIT) {
      this.byDevice.clear();
      this.size = 0;
    }
    let channels = this.byDevice.get(s.device_id);
    if (!channels) this.byDevice.set(s.device_id, (channels = new Map<string, SensorRef>()));
    if (!channels.has(channelKey(s.kind, s.label_key))) this.size++;
    channels.set(channelKey(s.kind, s.label_key), s);
  }
}

/**
 * The one ingest core every way in ends in (docs/architecture.md): authenticate the
 * device, count its rate limit, resolve or create its channels with the site vertical's defaults,
 * write with dedup on (device, ts, channel), move last values and the device state, and hand the new
 * points to the rule engine.
 *
 * Requests are grouped: everything that arrives while the previous group is being written is
 * written in the next one, in one transaction. A durable commit (fsync) per group instead of per
 * request is what lets a 200 mean "committed" at tens of thousands of measurements per second.
 */
export class IngestCore implements Ingest {
  private queue: Pending[] = [];
  /** Groups being written now; at most `store.concurrency` (1 on SQLite: one writer anyway). */
  private writers = 0;
  private scheduled = false;
  /** The groups being written now (`catchUp` waits for them). */
  private readonly inFlight = new Set<Promise<void>>();
  private readonly channels = new ChannelCache();
  private readonly listeners: AcceptedListener[] = [];
  private readonly deviceListeners: DeviceStateListener[] = [];

  private readonly folder: JournalFolder;

  constructor(
    private readonly deps: {
      store: IngestStore;
      clock: Clock;
      config: Pick<Config, 'rateLimits' | 'rateLimitMode'>;
      log: Pick<Logger, 'warn' | 'error'>;
    },
  ) {
    this.folder = new JournalFolder({ store: deps.store, log: deps.log });
  }

  /**
   * Resolves once the state derived from everything ingested so far (rollups, last values, the rule
   * engine's marker) is up to date: readers of that state call it first (ingest.fold.ts). "So far"
   * includes the groups being written at the call: on PostgreSQL several are, and they commit in
   * any order, so without waiting a rule pass would see a device's later reading before an earlier
   * one still in flight and re-derive the channel as late data (docs/design/rules.md, "Alternatives
   * rejected").
   */
  async catchUp(): Promise<void> {
    if (this.inFlight.size > 0) await Promise.all(this.inFlight);
    return this.folder.catchUp();
  }

  /** After the last submit: folds what is left. */
  stop(): Promise<void> {
    return this.folder.stop();
  }

  /** Called with the number of measurements each group wrote, after it committed. A failing listener is logged. */
  onAccepted(listener: AcceptedListener): void {
    this.listeners.push(listener);
  }

  /**
   * Called after commit with the devices a group flipped online or offline (an uplink after
   * silence, a last-will `lwt` from the Shelly GET or the MQTT bridge). A failing listener is logged.
   */
  onDeviceState(listener: DeviceStateListener): void {
    this.deviceListeners.push(listener);
  }

  submit(item: IngestItem): Promise<IngestOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.scheduled && this.writers < this.maxWriters) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private get maxWriters(): number {
    return this.deps.store.concurrency ?? 1;
  }

  /** Starts writers while there is work and room: what arrives during a group goes into the next. */
  private flush(): void {
    this.scheduled = false;
    while (this.writers < this.maxWriters && this.queue.length > 0) {
      this.writers++;
      void this.writer();
    }
  }

  private async writer(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const group = this.runBatch(this.queue.splice(0, MAX_BATCH)); // never rejects
        this.inFlight.add(group);
        await group;
        this.inFlight.delete(group);
      }
    } finally {
      this.writers--;
    }
  }

  private async runBatch(batch: Pending[]): Promise<void> {
    const items = batch.map((p) => p.item);
    let learned: SensorRef[] = [];
    let flipped: DeviceStateChange[] = [];
    let outcomes: IngestOutcome[];
    try {
      outcomes = await this.withRetry(() =>
        this.deps.store.transaction(async (tx) => {
          learned = [];
          flipped = [];
          return this.process(tx, items, learned, flipped);
        }),
      );
    } catch (err) {
      for (const p of batch) p.reject(err);
      return;
    }
    // Only now that the transaction committed may new channels enter the cache.
    for (const s of learned) this.remember(s);
    batch.forEach((p, i) => p.resolve(outcomes[i]!));
    const accepted = outcomes.reduce((n, o) => n + (o.ok ? o.accepted : 0), 0);
    if (accepted > 0) {
      this.folder.written();
      this.emitTo(this.listeners, accepted);
    }
    if (flipped.length > 0) this.emitTo(this.deviceListeners, flipped);
  }

  /** One retry when PostgreSQL chose this group as a deadlock or serialization victim. */
  private async withRetry<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code !== '40P01' && code !== '40001') throw err;
      this.deps.log.warn({ code }, 'ingest group retried after a deadlock');
      return work();
    }
  }

  private emitTo<T>(listeners: ((value: T) => void | Promise<void>)[], value: T): void {
    for (const listener of listeners) {
      try {
        const result = listener(value);
        if (result instanceof Promise) {
          result.catch((err: unknown) => this.deps.log.error({ err }, 'ingest listener failed'));
        }
      } catch (err) {
        this.deps.log.error({ err }, 'ingest listener failed');
      }
    }
  }

  private remember(s: SensorRef): void {
    this.channels.add(s);
  }

  /**
   * `learned` collects the channels looked up or created, for the cache once the group commits;
   * `flipped` the devices whose online state changed, for `onDeviceState` listeners.
   */
  private async process(
    tx: IngestTx,
    items: IngestItem[],
    learned: SensorRef[],
    flipped: DeviceStateChange[],
  ): Promise<IngestOutcome[]> {
    const { clock, config } = this.deps;
    const now = clock.nowMicros();
    const outcomes: (IngestOutcome | null)[] = items.map(() => null);
    const fail = (i: number, error: ApiError, rate: RateInfo | null = null) => {
      outcomes[i] = { ok: false, error, rate };
    };

    // 1. Who is sending: devices by token hash, or by the id the pipeline already authenticated.
    const hashes = [
      ...new Set(
        items.flatMap((it) =>
          it.credential.kind === 'token' && it.credential.tokenHash ? [it.credential.tokenHash] : [],
        ),
      ),
    ];
    const ids = [
      ...new Set(
        items.flatMap((it) => (it.credential.kind === 'device' ? [it.credential.principal.deviceId] : [])),
      ),
    ];
    const byHash = new Map<string, IngestDevice>();
    const byId = new Map<string, IngestDevice>();
    if (hashes.length) for (const d of await tx.devicesByTokenHash(hashes)) byHash.set(d.token_hash!, d);
    if (ids.length) for (const d of await tx.devicesById(ids)) byId.set(d.id, d);

    const devices: (IngestDevice | null)[] = items.map((item, i) => {
      const c = item.credential;
      const device =
        c.kind === 'token'
          ? c.tokenHash
            ? byHash.get(c.tokenHash)
            : undefined
          : byId.get(c.principal.deviceId);
      if (!device) {
        fail(i, new Unauthenticated('token_invalid', 'the device token is unknown, revoked or malformed'));
        return null;
      }
      if (item.deviceRef !== null && item.deviceRef !== device.local_id && item.deviceRef !== device.id) {
        fail(
          i,
          new Forbidden(
            'device_not_in_token',
            `this token belongs to device ${device.local_id}, not ${item.deviceRef}`,
          ),
        );
        return null;
      }
      return device;
    });

    // 2. The per-device rate limit, counted in the same transaction as the data.
    const limit = config.rateLimits.ingestPerMin;
    const nowSeconds = Math.floor(now / 1_000_000);
    const windowStart = nowSeconds - (nowSeconds % RATE_WINDOW_SECONDS);
    const resetAt = windowStart + RATE_WINDOW_SECONDS;
    const hits = new Map<string, number>();
    items.forEach((item, i) => {
      const d = devices[i];
      if (d && item.countRate) hits.set(`ingest:${d.id}`, (hits.get(`ingest:${d.id}`) ?? 0) + 1);
    });
    const after = hits.size
      ? await tx.addRateHits(
          [...hits].map(([bucket, count]) => ({ bucket, count })),
          windowStart,
        )
      : new Map<string, number>();
    const seen = new Map<string, number>();
    const rates: (RateInfo | null)[] = items.map((item, i) => {
      const d = devices[i];
      if (!d || !item.countRate) return null;
      const bucket = `ingest:${d.id}`;
      const position = (after.get(bucket) ?? 0) - (hits.get(bucket) ?? 0) + (seen.get(bucket) ?? 0) + 1;
      seen.set(bucket, (seen.get(bucket) ?? 0) + 1);
      const rate = { limit, remaining: Math.max(0, limit - position), resetAt };
      if (position > limit) {
        if (config.rateLimitMode === 'enforce') {
          fail(i, new RateLimited(Math.max(1, resetAt - nowSeconds)), rate);
          devices[i] = null;
        } else {
          this.deps.log.warn(
            { device_id: d.id, limit },
            'ingest rate limit exceeded (warn mode: stored anyway)',
          );
        }
      }
      return rate;
    });

    // 3. Content errors, reported only now (after 401, 403 and 429).
    const measurementsOf: ValidMeasurement[][] = items.map((item, i) => {
      const d = devices[i];
      if (!d) return [];
      if (item.error) {
        fail(i, item.error, rates[i]);
        devices[i] = null;
        return [];
      }
      const list = [...item.measurements];
      if (item.shellyBattery !== undefined && item.shellyBattery !== null) {
        try {
          list.push(
            shellyBatteryMeasurement(item.shellyBattery, findModel(d.model)?.batteryInVolts === true),
          );
        } catch (err) {
          if (!(err instanceof IngestValidationError)) throw err;
          fail(i, toApiError(err), rates[i]);
          devices[i] = null;
          return [];
        }
      }
      return list;
    });

    // 4. Channels: from the cache, else the database, else created with the vertical's defaults.
    // `rowSensor` gets each measurement's channel, item after item: rows[rowStart[i], rowStart[i+1]).
    const rowStart: number[] = [];
    const rowSensor: (SensorRef | undefined)[] = [];
    const wanted = new Map<
      string,
      { device: IngestDevice; m: ValidMeasurement; key: string; rows: number[] }
    >();
    items.forEach((_item, i) => {
      rowStart.push(rowSensor.length);
      const d = devices[i];
      if (!d) return;
      const cached = this.channels.device(d.id);
      for (const m of measurementsOf[i]!) {
        const key = channelKey(m.kind, m.label ?? '');
        const s = cached?.get(key);
        if (!s) {
          const missing = `${d.id}\u0000${key}`;
          const entry = wanted.get(missing);
          if (entry) entry.rows.push(rowSensor.length);
          else wanted.set(missing, { device: d, m, key, rows: [rowSensor.length] });
        }
        rowSensor.push(s);
      }
    });
    rowStart.push(rowSensor.length);
    if (wanted.size > 0) {
      const resolved = new Map<string, SensorRef>();
      const lookup = async () => {
        const keys = [...wanted.values()].map(({ device, m }) => ({
          deviceId: device.id,
          kind: m.kind,
          labelKey: m.label ?? '',
        }));
        for (const s of await tx.findSensors(keys))
          resolved.set(`${s.device_id}\u0000${channelKey(s.kind, s.label_key)}`, s);
      };
      await lookup();
      const missing = [...wanted].filter(([key]) => !resolved.has(key));
      if (missing.length > 0) {
        await tx.insertSensors(
          missing.map(([, { device, m }]) => this.newSensor(device, m.kind, m.label, m.unit, now)),
        );
        await lookup();
      }
      for (const [key, { rows }] of wanted) {
        const s = resolved.get(key);
        if (!s) throw new Error(`channel ${key} could not be resolved`);
        for (const r of rows) rowSensor[r] = s;
      }
      learned.push(...resolved.values());
    }

    // 5. Measurements as (seq, ts, value) triplets, dedup on (channel, ts).
    const points = new Float64Array(rowSensor.length * 3);
    items.forEach((item, i) => {
      if (!devices[i]) return;
      const ts = item.ts ?? item.receivedAt;
      const measurements = measurementsOf[i]!;
      for (let k = 0, r = rowStart[i]!; k < measurements.length; k++, r++) {
        points[r * 3] = rowSensor[r]!.seq;
        points[r * 3 + 1] = ts;
        points[r * 3 + 2] = measurements[k]!.value;
      }
    });

    // 6. The device state (it depends on the items alone, not on what the write finds stored).
    const deviceState = new Map<string, { id: string; lastSeenAt: number; online: number; at: number }>();
    const deviceRow = new Map<string, IngestDevice>();
    items.forEach((item, i) => {
      const d = devices[i];
      if (!d) return;
      deviceRow.set(d.id, d);
      deviceState.set(d.id, {
        id: d.id,
        lastSeenAt: Math.max(item.receivedAt, deviceState.get(d.id)?.lastSeenAt ?? 0),
        online: item.lwt === 'offline' ? 0 : 1,
        at: item.receivedAt,
      });
    });
    for (const state of deviceState.values()) {
      const d = deviceRow.get(state.id)!;
      if (Number(d.online) === state.online) continue;
      flipped.push({
        accountId: d.account_id,
        deviceId: d.id,
        siteId: d.site_id,
        localId: d.local_id,
        online: state.online === 1,
        at: state.at,
      });
    }

    // The write: the points (dedup), the journal of those written (rollups, last values and the rule
    // engine's marker are derived from it by the fold, ingest.fold.ts, off this path), the devices,
    // and the online/offline job, durable with the data (a crash after commit must not lose the
    // device.online/offline webhooks).
    // (Points come only from items with a device: no device, nothing to write.)
    const written =
      deviceState.size > 0
        ? await tx.write({
            points,
            at: now,
            devices: [...deviceState.values()]
              .sort((a, b) => (a.id < b.id ? -1 : 1))
              .map(({ id, lastSeenAt, online }) => ({ id, lastSeenAt, online })),
            job:
              flipped.length > 0
                ? { id: newId('job'), kind: DEVICE_STATE_JOB, payload: JSON.stringify(flipped), at: now }
                : null,
          })
        : new Uint8Array(0);

    // 7. Answers.
    return items.map((_item, i) => {
      const done = outcomes[i];
      if (done) return done;
      const d = devices[i]!;
      let accepted = 0;
      for (let r = rowStart[i]!; r < rowStart[i + 1]!; r++) accepted += written[r]!;
      const channels: ResolvedChannel[] = [];
      let channelsJson = '';
      const listed = new Set<string>();
      const measurements = measurementsOf[i]!;
      for (let k = 0; k < measurements.length; k++) {
        const s = rowSensor[rowStart[i]! + k]!;
        if (listed.has(s.channel_id)) continue;
        listed.add(s.channel_id);
        const { channel, json } = answerChannel(s);
        channels.push(channel);
        channelsJson += (channelsJson === '' ? '' : ',') + json;
      }
      return {
        ok: true,
        deviceId: d.id,
        accountId: d.account_id,
        accepted,
        deduplicated: measurements.length - accepted,
        channels,
        channelsJson: `[${channelsJson}]`,
        rate: rates[i] ?? null,
      };
    });
  }

  private newSensor(
    device: IngestDevice,
    kind: MeasurementKind,
    label: string | null,
    unit: string,
    now: number,
  ): NewSensorRow {
    const rule = defaultRule(isVertical(device.vertical) ? device.vertical : 'generic', kind, unit);
    return {
      id: newId('snr'),
      channel_id: newId('chn'),
      account_id: device.account_id,
      device_id: device.id,
      kind,
      label,
      label_key: label ?? '',
      unit,
      ok_min: rule.okMin,
      ok_max: rule.okMax,
      grace_min: rule.graceMin,
      rule_enabled: rule.ruleEnabled ? 1 : 0,
      no_data_min: DEFAULT_NO_DATA_MIN,
      state: 'no_data',
      created_at: now,
    };
  }
}
