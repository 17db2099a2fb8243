import {
  EARLIEST_TS_MICROS,
  hasNul,
  IngestValidationError,
  MAX_FUTURE_MICROS,
  MAX_MEASUREMENTS,
  validateMeasurement,
  type ValidMeasurement,
} from '../../../shared/ingest.ts';
import {
  CHIRPSTACK_EVENTS,
  ChirpstackEventError,
  parseDeviceEvent,
  parseUplinkJson,
  parseUplinkProtobuf,
  type ChirpstackEncoding,
  type ChirpstackEventType,
} from '../../../shared/lorawan/chirpstack-events.ts';
import { measurementsFromObject } from '../../../shared/lorawan/decoded-object.ts';
import { decodePayload, decoderForModel } from '../../../shared/lorawan/payload-decoders.ts';
import { parseTtsMessage, TtsMessageError } from '../../../shared/lorawan/tts-messages.ts';
import { hashSecret } from '../auth/secrets.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import {
  Forbidden,
  InvalidRequest,
  Unauthenticated,
  Unprocessable,
  UnsupportedMediaType,
} from '../errors.ts';
import type { DevicePrincipal } from '../http/context.ts';
import type { Reply } from '../http/route-table.ts';
import type { DeliveryLog, IntegrationWays } from '../ingest/ingest.handlers.ts';
import type { Ingest, IngestItem } from '../ingest/ingest.types.ts';
import type { Logger } from '../logger.ts';
import { retentionCutoff } from '../retention/retention.ts';
import type { Db } from '../storage/database.ts';
import type { IntegrationDevices } from './integration-devices.ts';
import type { IntegrationKind, IntegrationRow, IntegrationsRepository } from './integrations.repository.ts';
import { modelOfIntegration } from './integrations.service.ts';

/** `last_used_at` is written at most this often per integration. */
const TOUCH_EVERY_MS = 60_000;
/** Remembered uplinks older than this are forgotten (network servers send each event once). */
const UPLINK_MEMORY_MICROS = 24 * 3600 * 1_000_000;
const FORGET_EVERY_MS = 3600_000;
const REPORTED_LIMIT = 100_000;
/** How long a token found in the database is trusted without asking again. */
const TOKEN_CACHE_MS = 1000;
const CACHE_LIMIT = 10_000;

/** One uplink, whichever network server delivered it. */
interface Uplink {
  devEui: string;
  /** The same for every delivery of this uplink. */
  key: string;
  time: number | null;
  fPort: number;
  data: Buffer;
  object: Record<string, unknown> | null;
  rssi: number | null;
}

/**
 * The LoRaWAN webhooks (ChirpStack v4 HTTP integration, The Things Stack v3 webhooks) and the Shelly
 * GET's integration tokens: protocol adapters that find the integration by its `whk_` token, the
 * device by DevEUI on the integration's site, translate the event into measurements, and submit
 * them to the one ingest core (docs/design/integrations.md). Network servers deliver each event
 * once and never retry, so a payload that cannot be decoded is answered 200 and logged, never 5xx,
 * and a redelivered uplink is stored under its first delivery's time, so it is stored once.
 */
export class IntegrationWebhooks implements IntegrationWays {
  private readonly touched = new Map<string, number>();
  /** Token hash → its integration, trusted until `until` (performance.now()). */
  private readonly tokens = new Map<string, { row: IntegrationRow; until: number }>();
  /** (device, field) pairs reported as unknown already: each is logged once. */
  private readonly reported = new Set<string>();
  private lastForget = 0;

  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      config: Pick<Config, 'retentionDays'>;
      log: Logger;
      integrations: IntegrationsRepository;
      devices: IntegrationDevices;
      ingest: Ingest;
    },
  ) {}

  /**
   * The live integration of a `whk_` token: 401 `token_invalid` otherwise, 403 for another kind.
   * A token found is trusted for `TOKEN_CACHE_MS` without asking the database again (a network
   * server delivers for many devices at once); deleting or rotating it in this process forgets it
   * at once, another process's change is seen within that time (docs/design/integrations.md).
   */
  async authenticate(token: string | null, kind: IntegrationKind): Promise<IntegrationRow> {
    const { db, integrations, clock } = this.deps;
    const hash = token ? hashSecret(token) : null;
    const now = performance.now();
    const cached = hash ? this.tokens.get(hash) : undefined;
    let row = cached && cached.until > now ? cached.row : undefined;
    if (!row && hash) {
      row = await integrations.findByTokenHash(db, hash);
      if (row) {
        if (this.tokens.size >= CACHE_LIMIT) this.tokens.clear();
        this.tokens.set(hash, { row, until: now + TOKEN_CACHE_MS });
      } else this.tokens.delete(hash);
    }
    if (!row)
      throw new Unauthenticated('token_invalid', 'the integration token is unknown, revoked or malformed');
    if (row.kind !== kind) {
      throw new Forbidden('forbidden', `this token belongs to a ${row.kind} integration, not ${kind}`);
    }
    if ((this.touched.get(row.id) ?? -Infinity) + TOUCH_EVERY_MS < now) {
      this.touched.set(row.id, now);
      await integrations.touch(db, row.id, clock.nowMicros());
    }
    return row;
  }

  /** After a delete or a rotation: the integration's old token is refused from now on. */
  forget(integrationId: string): void {
    for (const [hash, { row }] of this.tokens) if (row.id === integrationId) this.tokens.delete(hash);
  }

  /** `GET /v1/ingest/shelly?token=whk_…`: the device the request names on the integration's site. */
  async shellyDevice(
    token: string,
    localId: string | null,
    model: string | undefined,
  ): Promise<DevicePrincipal> {
    const integration = await this.authenticate(token, 'shelly');
    if (localId === null) {
      throw new InvalidRequest('invalid_request', 'device is required', [
        { path: 'device', message: 'required' },
      ]);
    }
    if (hasNul(localId))
      throw new Unprocessable('invalid_characters', 'device must not contain U+0000 (NUL)');
    return this.deps.devices.resolve(integration, localId, model ?? modelOfIntegration(integration));
  }

  /** `POST /v1/webhooks/chirpstack?event=<type>`. */
  async chirpstack(
    token: string | null,
    event: unknown,
    contentType: string | undefined,
    body: Buffer | null,
    log: DeliveryLog,
  ): Promise<Reply> {
    const integration = await this.authenticate(token, 'chirpstack');
    const receivedAt = this.deps.clock.nowMicros();
    if (typeof event !== 'string' || event === '') {
      throw new InvalidRequest(
        'invalid_request',
        'the event query parameter is required (ChirpStack adds it)',
        [{ path: 'event', message: 'required' }],
      );
    }
    if (!(CHIRPSTACK_EVENTS as readonly string[]).includes(event)) {
      log.info({ integration_id: integration.id, event }, 'ChirpStack event of an unknown type ignored');
      return ignored(`unknown event type ${event}`);
    }
    const type = event as ChirpstackEventType;
    const encoding = encodingOf(contentType, body);
    if (!body || body.length === 0) throw new InvalidRequest('bad_json', 'the body is empty');
    try {
      if (type === 'up') {
        const up = encoding === 'json' ? parseUplinkJson(body) : parseUplinkProtobuf(body);
        return await this.uplink(
          integration,
          {
            devEui: up.devEui,
            key: up.deduplicationId || `${up.devEui}:${up.fCnt}:${up.time ?? ''}`,
            time: up.time,
            fPort: up.fPort,
            data: up.data,
            object: up.object,
            rssi: up.rssi,
          },
          receivedAt,
          log,
        );
      }
      const e = parseDeviceEvent(type, body, encoding);
      await this.recordEvent(integration, e.devEui, type, receivedAt, {
        ...(e.time !== null ? { time: e.time } : {}),
        ...(e.batteryLevel !== undefined ? { battery_level: e.batteryLevel } : {}),
      });
      if (type === 'join') {
        return await this.submit(integration, e.devEui, { receivedAt, ts: null, measurements: [] }, log);
      }
      if (type === 'status') {
        const measurements =
          e.batteryLevel === null || e.batteryLevel === undefined
            ? []
            : valid([{ type: 'battery', value: Math.round(e.batteryLevel * 100) / 100 }], log, e.devEui);
        const key = e.deduplicationId ? `status:${e.deduplicationId}` : null;
        const ts = await this.uplinkTime(integration, key, e.time, receivedAt);
        return await this.submit(integration, e.devEui, { receivedAt, ts, measurements }, log);
      }
      return { status: 200, body: { recorded: type } };
    } catch (err) {
      if (!(err instanceof ChirpstackEventError)) throw err;
      throw new InvalidRequest(encoding === 'json' ? 'bad_json' : 'invalid_request', err.message);
    }
  }

  /** `POST /v1/webhooks/ttn`: uplink messages and join accepts. */
  async ttn(token: string | null, body: Buffer | null, log: DeliveryLog): Promise<Reply> {
    const integration = await this.authenticate(token, 'ttn');
    const receivedAt = this.deps.clock.nowMicros();
    if (!body || body.length === 0) throw new InvalidRequest('bad_json', 'the body is empty');
    let m;
    try {
      m = parseTtsMessage(body);
    } catch (err) {
      if (!(err instanceof TtsMessageError)) throw err;
      throw new InvalidRequest('bad_json', err.message);
    }
    if (m.devEui === null) {
      log.info({ integration_id: integration.id }, 'TTS message without a DevEUI ignored');
      return ignored('the end device has no DevEUI');
    }
    if (m.kind === 'join') {
      await this.recordEvent(integration, m.devEui, 'join', receivedAt, {});
      return this.submit(integration, m.devEui, { receivedAt, ts: null, measurements: [] }, log);
    }
    if (m.kind === 'other') {
      log.info({ integration_id: integration.id, dev_eui: m.devEui }, 'TTS message of another kind ignored');
      return ignored('neither an uplink message nor a join accept');
    }
    return this.uplink(
      integration,
      {
        devEui: m.devEui,
        key: m.uplinkKey || `${m.devEui}:${m.fCnt}:${m.time ?? ''}`,
        time: m.time,
        fPort: m.fPort,
        data: m.data,
        object: m.decoded,
        rssi: m.rssi,
      },
      receivedAt,
      log,
    );
  }

  /**
   * An uplink's measurements: the network server's decoded object when it sent one, else the
   * device model's decoder; its best RSSI as `signal`. Stored under the first delivery's time.
   */
  private async uplink(
    integration: IntegrationRow,
    up: Uplink,
    receivedAt: number,
    log: DeliveryLog,
  ): Promise<Reply> {
    const device = await this.device(integration, up.devEui);
    let object = up.object;
    let decodedBy = 'network server';
    let mapped = object ? measurementsFromObject(object) : null;
    // No decoded object, or one without a field we know (a codec of its own naming): the model's decoder.
    if (!mapped || mapped.measurements.length + mapped.dropped.length === 0) {
      const decoder = decoderForModel(device.model);
      const decoded = decodePayload(decoder, up.data, up.fPort);
      if (decoded) {
        object = decoded;
        decodedBy = decoder;
        const fromPayload = measurementsFromObject(decoded);
        mapped = { ...fromPayload, unknown: [...(mapped?.unknown ?? []), ...fromPayload.unknown] };
      }
    }
    mapped ??= { measurements: [], dropped: [], unknown: [] };
    if (!object && up.data.length > 0) {
      log.info(
        { integration_id: integration.id, dev_eui: up.devEui, model: device.model, f_port: up.fPort },
        'uplink payload not decoded: no decoded object and no decoder for the model',
      );
    }
    if (mapped.dropped.length > 0) {
      log.info(
        { dev_eui: up.devEui, dropped: mapped.dropped },
        'uplink values outside their sanity range dropped',
      );
    }
    this.reportUnknown(device.deviceId, up.devEui, mapped.unknown, decodedBy, log);
    // One request's worth, as every way in (room kept for the signal): the rest is named in the log.
    const measurements = mapped.measurements.slice(0, MAX_MEASUREMENTS - 1);
    if (mapped.measurements.length > measurements.length) {
      log.warn(
        {
          dev_eui: up.devEui,
          kept: measurements.length,
          not_stored: mapped.measurements
            .slice(measurements.length)
            .map((m) => (m.label ? `${m.kind}/${m.label}` : m.kind)),
        },
        'uplink carries more values than one reading holds: the rest are not stored',
      );
    }
    if (up.rssi !== null) measurements.push(...valid([{ type: 'signal', value: up.rssi }], log, up.devEui));
    const ts = await this.uplinkTime(integration, up.key, up.time, receivedAt);
    return this.submit(integration, up.devEui, { receivedAt, ts, measurements }, log, device);
  }

  /**
   * The time an uplink is stored under. The network server's own time is the same in every delivery
   * of the uplink, so a redelivery meets the stored (device, ts, channel) rows and is a no-op. Only
   * without a plausible time is the receive time used, and then the uplink's key is remembered with
   * it (`integration_uplinks`), so a redelivery takes the first delivery's time.
   */
  private async uplinkTime(
    integration: IntegrationRow,
    key: string | null,
    time: number | null,
    receivedAt: number,
  ): Promise<number> {
    // Older than 2000 or than the retention keeps: the network server's clock is wrong, not the reading.
    const earliest = Math.max(EARLIEST_TS_MICROS, retentionCutoff(this.deps.config, receivedAt));
    if (time !== null && time >= earliest && time <= receivedAt + MAX_FUTURE_MICROS) return time;
    if (key === null) return receivedAt; // nothing tells two deliveries of this event apart
    const { db, integrations } = this.deps;
    this.forgetOldUplinks(receivedAt);
    return integrations.rememberUplink(db, integration.id, key, receivedAt, receivedAt);
  }

  private forgetOldUplinks(now: number): void {
    const at = performance.now();
    if (this.lastForget + FORGET_EVERY_MS > at) return;
    this.lastForget = at;
    this.deps.integrations.forgetUplinks(this.deps.db, now - UPLINK_MEMORY_MICROS).catch((err: unknown) => {
      this.deps.log.warn({ err }, 'forgetting old integration uplinks failed; retried in an hour');
    });
  }

  private device(integration: IntegrationRow, devEui: string): Promise<DevicePrincipal> {
    return this.deps.devices.resolve(integration, devEui, modelOfIntegration(integration));
  }

  /** Through the one ingest core; answers as `POST /v1/ingest` does, with the device's id. */
  private async submit(
    integration: IntegrationRow,
    devEui: string,
    part: Pick<IngestItem, 'receivedAt' | 'ts' | 'measurements'>,
    log: DeliveryLog,
    resolved?: DevicePrincipal,
  ): Promise<Reply> {
    const { ingest, devices } = this.deps;
    const once = async (principal: DevicePrincipal) =>
      ingest.submit({
        credential: { kind: 'device', principal },
        // A network server delivers once and never retries: a 429 would lose the reading.
        countRate: false,
        deviceRef: null,
        error: null,
        way: integration.kind,
        ...part,
      });
    let outcome = await once(resolved ?? (await this.device(integration, devEui)));
    if (!outcome.ok && outcome.error.code === 'token_invalid') {
      // The cached device was deleted meanwhile: resolve again (it may create one).
      devices.forget(integration, devEui);
      outcome = await once(await this.device(integration, devEui));
    }
    if (!outcome.ok) throw outcome.error;
    log.info(
      {
        integration_id: integration.id,
        dev_eui: devEui,
        accepted: outcome.accepted,
        deduplicated: outcome.deduplicated,
      },
      'integration delivery stored',
    );
    const { accepted, deduplicated, channels, deviceId } = outcome;
    return { status: 200, body: { device_id: deviceId, accepted, deduplicated, channels } };
  }

  private async recordEvent(
    integration: IntegrationRow,
    devEui: string,
    event: string,
    at: number,
    detail: Record<string, unknown>,
  ): Promise<void> {
    await this.deps.integrations.recordEvent(this.deps.db, {
      integration_id: integration.id,
      dev_eui: devEui,
      event,
      at,
      detail: JSON.stringify(detail),
    });
  }

  private reportUnknown(
    deviceId: string,
    devEui: string,
    fields: string[],
    decodedBy: string,
    log: DeliveryLog,
  ): void {
    const fresh = fields.filter((f) => !this.reported.has(`${deviceId}\u0000${f}`));
    if (fresh.length === 0) return;
    if (this.reported.size >= REPORTED_LIMIT) this.reported.clear();
    for (const f of fresh) this.reported.add(`${deviceId}\u0000${f}`);
    log.info(
      { device_id: deviceId, dev_eui: devEui, fields: fresh, decoded_by: decodedBy },
      'decoded fields without a known meaning ignored (reported once per device)',
    );
  }
}

/** The measurements that pass validation; the rest are logged and left out. */
function valid(raw: { type: string; value: number }[], log: DeliveryLog, devEui: string): ValidMeasurement[] {
  const out: ValidMeasurement[] = [];
  for (const m of raw) {
    try {
      out.push(validateMeasurement(m, m.type));
    } catch (err) {
      if (!(err instanceof IngestValidationError)) throw err;
      log.info(
        { dev_eui: devEui, type: m.type, value: m.value, reason: (err as Error).message },
        'value dropped',
      );
    }
  }
  return out;
}

function ignored(reason: string): Reply {
  return { status: 200, body: { ignored: reason } };
}

/** ChirpStack sends `application/json` or `application/octet-stream` (protobuf); without a type, the body tells. */
function encodingOf(contentType: string | undefined, body: Buffer | null): ChirpstackEncoding {
  const type = contentType?.split(';')[0]!.trim().toLowerCase();
  if (type === 'application/json' || type?.endsWith('+json')) return 'json';
  if (
    type === 'application/octet-stream' ||
    type === 'application/x-protobuf' ||
    type === 'application/protobuf'
  )
    return 'protobuf';
  if (type === undefined || type === '') return body?.find((b) => b > 0x20) === 0x7b ? 'json' : 'protobuf';
  throw new UnsupportedMediaType();
}
