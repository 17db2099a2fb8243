import integration from '@chirpstack/chirpstack-api/integration/integration_pb.js';
import { z } from 'zod';
import { parseTimestampMicros } from '../../../../shared/time.ts';

/**
 * A ChirpStack v4 `up` event (reference/protocols.md, "ChirpStack v4"), from either encoding of the
 * MQTT integration, reduced to what a reading needs. JSON is parsed with a zod schema (the jspb
 * classes have no JSON parser, and their toObject() names differ from the wire JSON); protobuf is
 * `integration.UplinkEvent` from @chirpstack/chirpstack-api.
 */
export interface UplinkEventData {
  devEui: string;
  deduplicationId: string;
  /** When the network server received the uplink (microseconds); null when absent. */
  time: number | null;
  fCnt: number;
  fPort: number;
  data: Buffer;
  /** The codec's decoded object; null when the device profile has no codec. */
  object: Record<string, unknown> | null;
  /** The best RSSI over the receiving gateways, dBm. */
  rssi: number | null;
}

export class UplinkEventError extends Error {}

const UplinkJson = z.object({
  deduplicationId: z.string().default(''),
  time: z.string().optional(),
  deviceInfo: z.object({ devEui: z.string().regex(/^[0-9a-fA-F]{16}$/) }).loose(),
  fCnt: z.number().int().default(0),
  fPort: z.number().int().default(0),
  data: z.string().default(''),
  object: z.record(z.string(), z.unknown()).nullish(),
  rxInfo: z.array(z.object({ rssi: z.number().optional() }).loose()).default([]),
});

function bestRssi(values: number[]): number | null {
  return values.length === 0 ? null : Math.max(...values);
}

export function parseUplinkJson(payload: Buffer): UplinkEventData {
  let raw: unknown;
  try {
    raw = JSON.parse(payload.toString('utf8'));
  } catch {
    throw new UplinkEventError('the event is not JSON');
  }
  const parsed = UplinkJson.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UplinkEventError(`not an up event: ${issue.path.join('.')}: ${issue.message}`);
  }
  const e = parsed.data;
  const time = e.time === undefined ? null : parseTimestampMicros(e.time);
  return {
    devEui: e.deviceInfo.devEui.toLowerCase(),
    deduplicationId: e.deduplicationId,
    time,
    fCnt: e.fCnt,
    fPort: e.fPort,
    data: Buffer.from(e.data, 'base64'),
    object: e.object ?? null,
    rssi: bestRssi(e.rxInfo.flatMap((r) => (typeof r.rssi === 'number' ? [r.rssi] : []))),
  };
}

export function parseUplinkProtobuf(payload: Buffer): UplinkEventData {
  let event: integration.UplinkEvent;
  try {
    event = integration.UplinkEvent.deserializeBinary(new Uint8Array(payload));
  } catch (err) {
    throw new UplinkEventError(`not a protobuf UplinkEvent: ${(err as Error).message}`);
  }
  const devEui = event.getDeviceInfo()?.getDevEui() ?? '';
  if (!/^[0-9a-fA-F]{16}$/.test(devEui)) throw new UplinkEventError('the event carries no DevEUI');
  const time = event.getTime();
  const object = event.getObject();
  return {
    devEui: devEui.toLowerCase(),
    deduplicationId: event.getDeduplicationId(),
    time: time ? time.getSeconds() * 1_000_000 + Math.floor(time.getNanos() / 1000) : null,
    fCnt: event.getFCnt(),
    fPort: event.getFPort(),
    data: Buffer.from(event.getData_asU8()),
    object: object ? object.toJavaScript() : null,
    rssi: bestRssi(event.getRxInfoList().map((r) => r.getRssi())),
  };
}

/** JSON when the payload starts like a JSON object, else protobuf (`encoding: auto`). */
export function parseUplinkEvent(payload: Buffer, encoding: 'auto' | 'json' | 'protobuf'): UplinkEventData {
  if (encoding === 'json') return parseUplinkJson(payload);
  if (encoding === 'protobuf') return parseUplinkProtobuf(payload);
  const first = payload.find((b) => b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09);
  return first === 0x7b ? parseUplinkJson(payload) : parseUplinkProtobuf(payload);
}
