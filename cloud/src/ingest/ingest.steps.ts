import { IngestValidationError, type ValidMeasurement } from '../../../shared/ingest.ts';
import { newId } from '../../../shared/ids.ts';
import type { MeasurementKind } from '../../../shared/kinds.ts';
import { formatSeconds } from '../../../shared/time.ts';
import { shellyBatteryMeasurement } from '../../../shared/shelly.ts';
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
import type { Logger } from '../logger.ts';
import { retentionCutoff } from '../retention/retention.ts';
import { defaultRule, isVertical } from '../sites/verticals.ts';
import { channelKey, type ChannelCache } from './channel-cache.ts';
import type {
  DeviceStateChange,
  IngestDevice,
  IngestItem,
  IngestOutcome,
  IngestTx,
  NewSensorRow,
  RateInfo,
  ResolvedChannel,
  SensorRef,
} from './ingest.types.ts';

/**
 * The steps of one ingest group, in the order they run (`INGEST_STEPS`): each has one job, reads
 * and fills slots of the group, and a step that decides an item's failure answers it and drops its
 * device, so that later steps skip it. The checks run in the order docs/api.md gives for every way
 * in: 401, 403, 429, then 400/422. Steps work on the whole group: a database call per group, never
 * per item or per measurement.
 */

/** The job that turns a group's online/offline flips into webhooks (payload: DeviceStateChange[]). */
export const DEVICE_STATE_JOB = 'device_state';
const RATE_WINDOW_SECONDS = 60;
const DEFAULT_NO_DATA_MIN = 60;
const NO_POINTS = new Float64Array(0);
const NOTHING_WRITTEN = new Uint8Array(0);

/** A device's state after the group: last seen, online, and the time of the request that set it. */
export interface DeviceStateAfter {
  device: IngestDevice;
  lastSeenAt: number;
  online: number;
  at: number;
}

/** One group on its way through the steps: one slot per item in each per-item array. */
export interface IngestGroup {
  readonly items: readonly IngestItem[];
  /** The group's server time, microseconds. */
  readonly now: number;
  /** Each item's answer: a failure as soon as a step decides it, the rest from `answerItems`. */
  readonly outcomes: (IngestOutcome | null)[];
  /** Each item's device (`authenticate`); null once the item failed. */
  devices: (IngestDevice | null)[];
  /** Each item's rate-limit position (`countRateLimit`); null when it does not count. */
  rates: (RateInfo | null)[];
  /** Each item's measurements, the Shelly battery included (`validateContent`). */
  measurements: (readonly ValidMeasurement[])[];
  /** Item i's measurements are rows [rowStart[i], rowStart[i + 1]) of `rowSensor` and `points`. */
  rowStart: number[];
  /** Each row's channel (`resolveChannels`). */
  rowSensor: (SensorRef | undefined)[];
  /** Channels looked up or created, for the cache once the group commits. */
  readonly learned: SensorRef[];
  /** (seq, ts, value) per row (`collectPoints`). */
  points: Float64Array;
  /** Devices after the group, by id (`trackDeviceState`). */
  readonly deviceStates: Map<string, DeviceStateAfter>;
  /** Devices the group flips online or offline, for `onDeviceState` listeners. */
  readonly flipped: DeviceStateChange[];
  /** Per row, 1 written or 0 a duplicate (`writeGroup`). */
  written: Uint8Array;
}

/** What the steps read besides the group and its transaction. */
export interface IngestEnv {
  readonly config: Pick<Config, 'rateLimits' | 'rateLimitMode' | 'retentionDays'>;
  readonly log: Pick<Logger, 'warn'>;
  /** Channels committed by earlier groups. */
  readonly channels: Pick<ChannelCache, 'device'>;
}

export type IngestStep = (group: IngestGroup, tx: IngestTx, env: IngestEnv) => void | Promise<void>;

export function newGroup(items: readonly IngestItem[], now: number): IngestGroup {
  return {
    items,
    now,
    outcomes: items.map(() => null),
    devices: [],
    rates: [],
    measurements: [],
    rowStart: [],
    rowSensor: [],
    learned: [],
    points: NO_POINTS,
    deviceStates: new Map(),
    flipped: [],
    written: NOTHING_WRITTEN,
  };
}

export function toApiError(err: IngestValidationError): ApiError {
  const details = [{ path: err.path, message: err.message }];
  return err.status === 422
    ? new Unprocessable(err.code, err.message, details)
    : new InvalidRequest(err.code, err.message, details);
}

/** Answers item `i` with a failure; later steps skip it. */
function fail(g: IngestGroup, i: number, error: ApiError, rate: RateInfo | null = null): void {
  g.outcomes[i] = { ok: false, error, rate };
  g.devices[i] = null;
}

/** 401: finds each item's device, by token hash or by the id the HTTP pipeline authenticated. */
export async function authenticate(g: IngestGroup, tx: IngestTx): Promise<void> {
  const hashes = new Set<string>();
  const ids = new Set<string>();
  for (const { credential: c } of g.items) {
    if (c.kind === 'device') ids.add(c.principal.deviceId);
    else if (c.tokenHash) hashes.add(c.tokenHash);
  }
  const byHash = new Map<string, IngestDevice>();
  const byId = new Map<string, IngestDevice>();
  if (hashes.size) for (const d of await tx.devicesByTokenHash([...hashes])) byHash.set(d.token_hash!, d);
  if (ids.size) for (const d of await tx.devicesById([...ids])) byId.set(d.id, d);
  g.devices = g.items.map(
    ({ credential: c }) =>
      (c.kind === 'token'
        ? c.tokenHash
          ? byHash.get(c.tokenHash)
          : undefined
        : byId.get(c.principal.deviceId)) ?? null,
  );
  for (let i = 0; i < g.items.length; i++) {
    if (!g.devices[i])
      fail(g, i, new Unauthenticated('token_invalid', 'the device token is unknown, revoked or malformed'));
  }
}

/** 403: the device a request names (`local_id` or `dev_` id) must be the credential's own. */
export function authoriseDevice(g: IngestGroup): void {
  for (let i = 0; i < g.items.length; i++) {
    const device = g.devices[i];
    const ref = g.items[i]!.deviceRef;
    if (!device || ref === null || ref === device.local_id || ref === device.id) continue;
    fail(
      g,
      i,
      new Forbidden('device_not_in_token', `this token belongs to device ${device.local_id}, not ${ref}`),
    );
  }
}

/**
 * 429: counts each device's requests in its one-minute window, in the same transaction as the
 * data; past the limit an item fails in `enforce` mode and is stored with a warning in `warn` mode.
 */
export async function countRateLimit(g: IngestGroup, tx: IngestTx, env: IngestEnv): Promise<void> {
  const { config, log } = env;
  const limit = config.rateLimits.ingestPerMin;
  const nowSeconds = Math.floor(g.now / 1_000_000);
  const windowStart = nowSeconds - (nowSeconds % RATE_WINDOW_SECONDS);
  const resetAt = windowStart + RATE_WINDOW_SECONDS;
  const hits = new Map<string, number>();
  g.items.forEach((item, i) => {
    const d = g.devices[i];
    if (d && item.countRate) hits.set(`ingest:${d.id}`, (hits.get(`ingest:${d.id}`) ?? 0) + 1);
  });
  const after = hits.size
    ? await tx.addRateHits(
        [...hits].map(([bucket, count]) => ({ bucket, count })),
        windowStart,
      )
    : new Map<string, number>();
  const seen = new Map<string, number>();
  g.rates = g.items.map((item, i) => {
    const d = g.devices[i];
    if (!d || !item.countRate) return null;
    const bucket = `ingest:${d.id}`;
    const position = (after.get(bucket) ?? 0) - (hits.get(bucket) ?? 0) + (seen.get(bucket) ?? 0) + 1;
    seen.set(bucket, (seen.get(bucket) ?? 0) + 1);
    const rate = { limit, remaining: Math.max(0, limit - position), resetAt };
    if (position > limit) {
      if (config.rateLimitMode === 'enforce') {
        fail(g, i, new RateLimited(Math.max(1, resetAt - nowSeconds)), rate);
      } else {
        log.warn({ device_id: d.id, limit }, 'ingest rate limit exceeded (warn mode: stored anyway)');
      }
    }
    return rate;
  });
}

/**
 * 400/422: content errors, reported only now (after 401, 403 and 429); a Shelly battery value
 * becomes a measurement in the unit the device's model reports. A time older than the installation
 * keeps measurements (`RETENTION_DAYS`) is refused here, for every way in: stored, it would be
 * answered as accepted and then removed by the next retention run.
 */
export function validateContent(g: IngestGroup, _tx: IngestTx, env: IngestEnv): void {
  const cutoff = retentionCutoff(env.config, g.now);
  g.measurements = g.items.map((item, i) => {
    const d = g.devices[i];
    if (!d) return [];
    if (item.error) {
      fail(g, i, item.error, g.rates[i]);
      return [];
    }
    if ((item.ts ?? item.receivedAt) < cutoff) {
      const message = `ts is before ${formatSeconds(cutoff)}: this installation keeps measurements for ${env.config.retentionDays} days (RETENTION_DAYS)`;
      fail(g, i, new InvalidRequest('invalid_request', message, [{ path: 'ts', message }]), g.rates[i]);
      return [];
    }
    if (item.shellyBattery === undefined || item.shellyBattery === null) return item.measurements;
    try {
      const battery = shellyBatteryMeasurement(
        item.shellyBattery,
        findModel(d.model)?.batteryInVolts === true,
      );
      return [...item.measurements, battery];
    } catch (err) {
      if (!(err instanceof IngestValidationError)) throw err;
      fail(g, i, toApiError(err), g.rates[i]);
      return [];
    }
  });
}

/**
 * Each measurement's channel: from the cache, else the database, else created with the site
 * vertical's defaults. Channels not cached are looked up (and created) once per group.
 */
export async function resolveChannels(g: IngestGroup, tx: IngestTx, env: IngestEnv): Promise<void> {
  const { rowStart, rowSensor } = g;
  const wanted = new Map<string, { device: IngestDevice; m: ValidMeasurement; rows: number[] }>();
  for (let i = 0; i < g.items.length; i++) {
    rowStart.push(rowSensor.length);
    const d = g.devices[i];
    if (!d) continue;
    const cached = env.channels.device(d.id);
    for (const m of g.measurements[i]!) {
      const key = channelKey(m.kind, m.label ?? '');
      const s = cached?.get(key);
      if (!s) {
        const missing = `${d.id}\u0000${key}`;
        const entry = wanted.get(missing);
        if (entry) entry.rows.push(rowSensor.length);
        else wanted.set(missing, { device: d, m, rows: [rowSensor.length] });
      }
      rowSensor.push(s);
    }
  }
  rowStart.push(rowSensor.length);
  if (wanted.size === 0) return;

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
      missing.map(([, { device, m }]) => newSensor(device, m.kind, m.label, m.unit, g.now)),
    );
    await lookup();
  }
  for (const [key, { rows }] of wanted) {
    const s = resolved.get(key);
    if (!s) throw new Error(`channel ${key} could not be resolved`);
    for (const r of rows) rowSensor[r] = s;
  }
  g.learned.push(...resolved.values());
}

/** A new channel with the defaults of its site's vertical. */
export function newSensor(
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

/** The measurements as (seq, ts, value) triplets, one row each, in one array for the write. */
export function collectPoints(g: IngestGroup): void {
  const { rowStart, rowSensor } = g;
  const points = new Float64Array(rowSensor.length * 3);
  for (let i = 0; i < g.items.length; i++) {
    if (!g.devices[i]) continue;
    const item = g.items[i]!;
    const ts = item.ts ?? item.receivedAt;
    const measurements = g.measurements[i]!;
    for (let k = 0, r = rowStart[i]!; k < measurements.length; k++, r++) {
      points[r * 3] = rowSensor[r]!.seq;
      points[r * 3 + 1] = ts;
      points[r * 3 + 2] = measurements[k]!.value;
    }
  }
  g.points = points;
}

/**
 * Each device's state after the group (it depends on the items alone, not on what the write finds
 * stored): last seen, and online unless the last item carried an offline last-will; and the devices
 * whose online state this flips.
 */
export function trackDeviceState(g: IngestGroup): void {
  const states = g.deviceStates;
  for (let i = 0; i < g.items.length; i++) {
    const device = g.devices[i];
    if (!device) continue;
    const item = g.items[i]!;
    states.set(device.id, {
      device,
      lastSeenAt: Math.max(item.receivedAt, states.get(device.id)?.lastSeenAt ?? 0),
      online: item.lwt === 'offline' ? 0 : 1,
      at: item.receivedAt,
    });
  }
  for (const { device: d, online, at } of states.values()) {
    if (Number(d.online) === online) continue;
    g.flipped.push({
      accountId: d.account_id,
      deviceId: d.id,
      siteId: d.site_id,
      localId: d.local_id,
      online: online === 1,
      at,
    });
  }
}

/**
 * The write: the points (dedup on channel and ts), the journal of those written (rollups, last
 * values and the rule engine's marker are derived from it by the fold, ingest.fold.ts, off this
 * path), the devices in id order, and the online/offline job, durable with the data (a crash after
 * commit must not lose the device.online/offline webhooks). No device, nothing to write.
 */
export async function writeGroup(g: IngestGroup, tx: IngestTx): Promise<void> {
  if (g.deviceStates.size === 0) return;
  g.written = await tx.write({
    points: g.points,
    at: g.now,
    devices: [...g.deviceStates.values()]
      .sort((a, b) => (a.device.id < b.device.id ? -1 : 1))
      .map(({ device, lastSeenAt, online }) => ({ id: device.id, lastSeenAt, online })),
    job:
      g.flipped.length > 0
        ? { id: newId('job'), kind: DEVICE_STATE_JOB, payload: JSON.stringify(g.flipped), at: g.now }
        : null,
  });
}

/**
 * A channel as answers list it, and its JSON: both made once per channel and kept while the channel
 * is (serialising 32 channels per answer is a visible share of 32-measurement ingest's CPU).
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

/** The answer of every item not failed yet: accepted and deduplicated counts, its channels once each. */
export function answerItems(g: IngestGroup): void {
  const { rowStart, rowSensor, written } = g;
  for (let i = 0; i < g.items.length; i++) {
    if (g.outcomes[i]) continue;
    const d = g.devices[i]!;
    let accepted = 0;
    for (let r = rowStart[i]!; r < rowStart[i + 1]!; r++) accepted += written[r]!;
    const channels: ResolvedChannel[] = [];
    let channelsJson = '';
    const listed = new Set<string>();
    const measurements = g.measurements[i]!;
    for (let k = 0; k < measurements.length; k++) {
      const s = rowSensor[rowStart[i]! + k]!;
      if (listed.has(s.channel_id)) continue;
      listed.add(s.channel_id);
      const { channel, json } = answerChannel(s);
      channels.push(channel);
      channelsJson += (channelsJson === '' ? '' : ',') + json;
    }
    g.outcomes[i] = {
      ok: true,
      deviceId: d.id,
      accountId: d.account_id,
      accepted,
      deduplicated: measurements.length - accepted,
      channels,
      channelsJson: `[${channelsJson}]`,
      rate: g.rates[i] ?? null,
    };
  }
}

/** The pipeline of one group, as its table of contents. */
export const INGEST_STEPS: readonly IngestStep[] = [
  authenticate,
  authoriseDevice,
  countRateLimit,
  validateContent,
  resolveChannels,
  collectPoints,
  trackDeviceState,
  writeGroup,
  answerItems,
];

/** Runs the steps over one group inside its transaction; answers one outcome per item. */
export async function runIngestSteps(g: IngestGroup, tx: IngestTx, env: IngestEnv): Promise<IngestOutcome[]> {
  for (const step of INGEST_STEPS) {
    const pending = step(g, tx, env);
    if (pending) await pending;
  }
  return g.outcomes as IngestOutcome[];
}
