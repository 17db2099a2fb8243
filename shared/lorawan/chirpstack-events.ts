import integration from '@chirpstack/chirpstack-api/integration/integration_pb.js';
import jspb from 'google-protobuf';
import timestampPb from 'google-protobuf/google/protobuf/timestamp_pb.js';
import { z } from 'zod';
import { parseTimestampMicros } from '../time.ts';
import { checkWire } from './chirpstack-wire.ts';

/**
 * ChirpStack v4 integration events (`up`, `join`, `status`, and the rest by their DevEUI), from
 * either encoding: JSON as ChirpStack serialises it (camelCase, `data` in base64, default values
 * present) and protobuf (`integration.*Event` of @chirpstack/chirpstack-api). JSON is read with zod
 * schemas: the jspb classes have no JSON parser, and their `toObject()` names differ from the wire.
 * Used by the gateway's ChirpStack collector (MQTT integration) and the cloud's webhook (HTTP
 * integration), which receive the same events.
 */
export const CHIRPSTACK_EVENTS = [
  'up',
  'join',
  'status',
  'ack',
  'txack',
  'log',
  'location',
  'integration',
] as const;
export type ChirpstackEventType = (typeof CHIRPSTACK_EVENTS)[number];

export type ChirpstackEncoding = 'json' | 'protobuf';

/** An `up` event, reduced to what a reading needs. */
export interface UplinkEventData {
  devEui: string;
  deduplicationId: string;
  /** When the uplink was received: the event's `time`, else a gateway's or the network server's; null when absent. */
  time: number | null;
  fCnt: number;
  fPort: number;
  data: Buffer;
  /** The codec's decoded object; null when the device profile has no codec. */
  object: Record<string, unknown> | null;
  /** The best RSSI over the receiving gateways, dBm. */
  rssi: number | null;
}

/** Any other event: whose it is and when. `status` adds the battery level. */
export interface DeviceEventData {
  devEui: string;
  deduplicationId: string;
  time: number | null;
  /**
   * `status`: battery in percent; null when the device cannot tell (`batteryLevelUnavailable`) or
   * runs on external power (LoRaWAN's DevStatusAns battery 0, which ChirpStack reports as
   * `externalPowerSource` with a `batteryLevel` of 0: stored, it would raise a low-battery alarm).
   */
  batteryLevel?: number | null;
  externalPowerSource?: boolean;
}

export class ChirpstackEventError extends Error {}
/** Kept under the name the gateway has always used. */
export { ChirpstackEventError as UplinkEventError };

const DEV_EUI = /^[0-9a-fA-F]{16}$/;

const DeviceInfoJson = z.object({ devEui: z.string().regex(DEV_EUI) }).loose();

const UplinkJson = z
  .object({
    deduplicationId: z.string().default(''),
    time: z.string().nullish(),
    deviceInfo: DeviceInfoJson,
    fCnt: z.number().int().default(0),
    fPort: z.number().int().default(0),
    data: z.string().default(''),
    object: z.record(z.string(), z.unknown()).nullish(),
    rxInfo: z
      .array(
        z
          .object({ rssi: z.number().optional(), gwTime: z.string().nullish(), nsTime: z.string().nullish() })
          .loose(),
      )
      .default([]),
  })
  .loose();

const DeviceEventJson = z
  .object({
    deduplicationId: z.string().default(''),
    time: z.string().nullish(),
    deviceInfo: DeviceInfoJson,
    batteryLevel: z.number().optional(),
    batteryLevelUnavailable: z.boolean().optional(),
    externalPowerSource: z.boolean().optional(),
  })
  .loose();

function bestRssi(values: number[]): number | null {
  return values.length === 0 ? null : Math.max(...values);
}

function micros(text: string | null | undefined): number | null {
  return text ? parseTimestampMicros(text) : null;
}

function parseJsonText(payload: Buffer): unknown {
  try {
    return JSON.parse(payload.toString('utf8'));
  } catch {
    throw new ChirpstackEventError('the event is not JSON');
  }
}

function issue(error: z.ZodError, what: string): ChirpstackEventError {
  const first = error.issues[0]!;
  return new ChirpstackEventError(`not ${what}: ${first.path.join('.') || 'body'}: ${first.message}`);
}

export function parseUplinkJson(payload: Buffer): UplinkEventData {
  const parsed = UplinkJson.safeParse(parseJsonText(payload));
  if (!parsed.success) throw issue(parsed.error, 'an up event');
  const e = parsed.data;
  const rxTimes = e.rxInfo.flatMap((r) => [micros(r.gwTime), micros(r.nsTime)]).filter((t) => t !== null);
  return {
    devEui: e.deviceInfo.devEui.toLowerCase(),
    deduplicationId: e.deduplicationId,
    time: micros(e.time) ?? (rxTimes.length > 0 ? Math.min(...rxTimes) : null),
    fCnt: e.fCnt,
    fPort: e.fPort,
    data: Buffer.from(e.data, 'base64'),
    object: e.object ?? null,
    rssi: bestRssi(e.rxInfo.flatMap((r) => (typeof r.rssi === 'number' ? [r.rssi] : []))),
  };
}

type PbTimestamp = { getSeconds(): number; getNanos(): number } | undefined;

function pbMicros(time: PbTimestamp): number | null {
  return time ? time.getSeconds() * 1_000_000 + Math.floor(time.getNanos() / 1000) : null;
}

function pbDevEui(info: integration.DeviceInfo | undefined): string {
  const devEui = info?.getDevEui() ?? '';
  if (!DEV_EUI.test(devEui)) throw new ChirpstackEventError('the event carries no DevEUI');
  return devEui.toLowerCase();
}

export function parseUplinkProtobuf(payload: Buffer): UplinkEventData {
  let event: integration.UplinkEvent;
  try {
    checkWire(payload, 'integration.UplinkEvent');
    event = integration.UplinkEvent.deserializeBinary(new Uint8Array(payload));
  } catch (err) {
    throw new ChirpstackEventError(`not a protobuf UplinkEvent: ${(err as Error).message}`);
  }
  const rx = event.getRxInfoList();
  const rxTimes = rx
    .flatMap((r) => [pbMicros(r.getGwTime()), pbMicros(r.getNsTime())])
    .filter((t) => t !== null);
  return {
    devEui: pbDevEui(event.getDeviceInfo()),
    deduplicationId: event.getDeduplicationId(),
    time: pbMicros(event.getTime()) ?? (rxTimes.length > 0 ? Math.min(...rxTimes) : null),
    fCnt: event.getFCnt(),
    fPort: event.getFPort(),
    data: Buffer.from(event.getData_asU8()),
    object: codecObject(event.getObject()),
    rssi: bestRssi(rx.map((r) => r.getRssi())),
  };
}

/**
 * The codec's object as plain values; null when there is none, or when it holds a value of no kind
 * (which google-protobuf cannot convert): the uplink is then decoded as if the profile had no
 * codec, rather than refused, since ChirpStack never delivers a refused uplink again.
 */
function codecObject(
  object: ReturnType<integration.UplinkEvent['getObject']>,
): Record<string, unknown> | null {
  if (!object) return null;
  try {
    return object.toJavaScript();
  } catch {
    return null;
  }
}

/** JSON when the payload starts like a JSON object, else protobuf (`encoding: auto`). */
export function parseUplinkEvent(payload: Buffer, encoding: 'auto' | ChirpstackEncoding): UplinkEventData {
  if (encoding === 'json') return parseUplinkJson(payload);
  if (encoding === 'protobuf') return parseUplinkProtobuf(payload);
  const first = payload.find((b) => b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09);
  return first === 0x7b ? parseUplinkJson(payload) : parseUplinkProtobuf(payload);
}

/** The protobuf class of each event other than `up`, and its name in MESSAGE_FIELDS. */
const PB_CLASSES = {
  join: [integration.JoinEvent, 'integration.JoinEvent'],
  status: [integration.StatusEvent, 'integration.StatusEvent'],
  ack: [integration.AckEvent, 'integration.AckEvent'],
  txack: [integration.TxAckEvent, 'integration.TxAckEvent'],
  log: [integration.LogEvent, 'integration.LogEvent'],
  location: [integration.LocationEvent, 'integration.LocationEvent'],
} as const;

/** An event other than `up`: its device and time, and for `status` the battery. */
export function parseDeviceEvent(
  type: Exclude<ChirpstackEventType, 'up'>,
  payload: Buffer,
  encoding: ChirpstackEncoding,
): DeviceEventData {
  if (encoding === 'json') {
    const parsed = DeviceEventJson.safeParse(parseJsonText(payload));
    if (!parsed.success) throw issue(parsed.error, `a ${type} event`);
    const e = parsed.data;
    const out: DeviceEventData = {
      devEui: e.deviceInfo.devEui.toLowerCase(),
      deduplicationId: e.deduplicationId,
      time: micros(e.time),
    };
    if (type === 'status') {
      out.externalPowerSource = e.externalPowerSource ?? false;
      out.batteryLevel = e.batteryLevelUnavailable || out.externalPowerSource ? null : (e.batteryLevel ?? 0);
    }
    return out;
  }
  if (type === 'integration') return parseIntegrationEventProtobuf(payload);
  let event: InstanceType<(typeof PB_CLASSES)[keyof typeof PB_CLASSES][0]>;
  try {
    const [EventClass, message] = PB_CLASSES[type];
    checkWire(payload, message);
    event = EventClass.deserializeBinary(new Uint8Array(payload));
  } catch (err) {
    throw new ChirpstackEventError(`not a protobuf ${type} event: ${(err as Error).message}`);
  }
  const out: DeviceEventData = {
    devEui: pbDevEui(event.getDeviceInfo()),
    deduplicationId: 'getDeduplicationId' in event ? event.getDeduplicationId() : '',
    time: pbMicros(event.getTime()),
  };
  if (event instanceof integration.StatusEvent) {
    out.externalPowerSource = event.getExternalPowerSource();
    out.batteryLevel =
      event.getBatteryLevelUnavailable() || out.externalPowerSource ? null : event.getBatteryLevel();
  }
  return out;
}

/**
 * An `integration` event in protobuf. @chirpstack/chirpstack-api has no class for
 * `integration.IntegrationEvent`, so the fields we need (integration.proto: 1 `deduplication_id`,
 * 2 `time`, 3 `device_info`) are read with google-protobuf's reader and the package's `Timestamp`
 * and `DeviceInfo` classes; the rest (integration name, event type, object) is skipped.
 */
function parseIntegrationEventProtobuf(payload: Buffer): DeviceEventData {
  let deduplicationId = '';
  let time: InstanceType<typeof timestampPb.Timestamp> | undefined;
  let info: integration.DeviceInfo | undefined;
  try {
    checkWire(payload, 'integration.IntegrationEvent');
    const reader = new jspb.BinaryReader(new Uint8Array(payload));
    while (reader.nextField()) {
      if (reader.isEndGroup()) break;
      switch (reader.getFieldNumber()) {
        case 1:
          deduplicationId = reader.readString();
          break;
        case 2:
          time = timestampPb.Timestamp.deserializeBinary(reader.readBytes());
          break;
        case 3:
          info = integration.DeviceInfo.deserializeBinary(reader.readBytes());
          break;
        default:
          reader.skipField();
      }
    }
  } catch (err) {
    throw new ChirpstackEventError(`not a protobuf integration event: ${(err as Error).message}`);
  }
  return { devEui: pbDevEui(info), deduplicationId, time: pbMicros(time) };
}
