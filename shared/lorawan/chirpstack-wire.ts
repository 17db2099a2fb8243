import protobuf from 'protobufjs/minimal.js';

/**
 * The message-typed fields of every message a ChirpStack event holds, by field number, as the
 * classes of @chirpstack/chirpstack-api (and google-protobuf's Struct) define them. Only these need
 * naming: every other field is skipped by its wire type. `test/shared/lorawan/wire.unit.test.ts`
 * reads the same from the installed package's generated code, so an upgrade that moves a field
 * fails there. `*Entry` are map entries (key 1, value 2).
 */
export const MESSAGE_FIELDS: Record<string, Record<number, string>> = {
  'integration.UplinkEvent': {
    2: 'Timestamp',
    3: 'DeviceInfo',
    11: 'Struct',
    12: 'UplinkRxInfo',
    13: 'UplinkTxInfo',
    14: 'UplinkRelayRxInfo',
    15: 'JoinServerContext',
  },
  'integration.JoinEvent': {
    2: 'Timestamp',
    3: 'DeviceInfo',
    5: 'UplinkRelayRxInfo',
    6: 'JoinServerContext',
  },
  'integration.AckEvent': { 2: 'Timestamp', 3: 'DeviceInfo' },
  'integration.TxAckEvent': { 2: 'Timestamp', 3: 'DeviceInfo', 7: 'DownlinkTxInfo' },
  'integration.LogEvent': { 1: 'Timestamp', 2: 'DeviceInfo', 6: 'StringEntry' },
  'integration.StatusEvent': { 2: 'Timestamp', 3: 'DeviceInfo' },
  'integration.LocationEvent': { 2: 'Timestamp', 3: 'DeviceInfo', 4: 'Location' },
  // integration.proto's IntegrationEvent has no class in the package; its `object` (6) is not read.
  'integration.IntegrationEvent': { 2: 'Timestamp', 3: 'DeviceInfo' },
  DeviceInfo: { 9: 'StringEntry' },
  UplinkRelayRxInfo: {},
  JoinServerContext: { 2: 'KeyEnvelope' },
  KeyEnvelope: {},
  Location: {},
  UplinkRxInfo: {
    3: 'Timestamp',
    17: 'Timestamp',
    4: 'Duration',
    5: 'Duration',
    12: 'Location',
    15: 'StringEntry',
  },
  UplinkTxInfo: { 2: 'Modulation' },
  DownlinkTxInfo: { 3: 'Modulation', 6: 'Timing' },
  Modulation: { 3: 'LoraModulationInfo', 4: 'FskModulationInfo', 5: 'LrFhssModulationInfo' },
  LoraModulationInfo: {},
  FskModulationInfo: {},
  LrFhssModulationInfo: {},
  Timing: { 1: 'ImmediatelyTimingInfo', 2: 'DelayTimingInfo', 3: 'GPSEpochTimingInfo' },
  ImmediatelyTimingInfo: {},
  DelayTimingInfo: { 1: 'Duration' },
  GPSEpochTimingInfo: { 1: 'Duration' },
  Timestamp: {},
  Duration: {},
  Struct: { 1: 'ValueEntry' },
  Value: { 5: 'Struct', 6: 'ListValue' },
  ListValue: { 1: 'Value' },
  StringEntry: {},
  ValueEntry: { 2: 'Value' },
};

/** Nesting deeper than this is refused (a codec's object is a few levels deep). */
const MAX_DEPTH = 64;

export class WireError extends Error {}

/**
 * Checks that `bytes` is a well-formed encoding of `message`: every length, at every depth, fits
 * in what holds it, and every field ends where its message ends. google-protobuf's decoder
 * trusts a length until it has spent time in proportion to it, so an 8-byte body claiming a
 * 4 GiB string inside a nested message holds the event loop for minutes before it fails; checked
 * first, such a body is refused at once. Fields are walked with protobufjs' bounds-checked reader.
 */
export function checkWire(bytes: Uint8Array, message: string): void {
  const reader = protobuf.Reader.create(bytes);
  try {
    walk(reader, bytes.length, message, 0);
  } catch (err) {
    if (err instanceof WireError) throw err;
    throw new WireError((err as Error).message);
  }
}

function walk(reader: protobuf.Reader, end: number, message: string, depth: number): void {
  if (depth > MAX_DEPTH) throw new WireError(`nested deeper than ${MAX_DEPTH} messages`);
  const fields = MESSAGE_FIELDS[message] ?? {};
  while (reader.pos < end) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    const wireType = tag & 7;
    if (field === 0) throw new WireError('field number 0');
    if (wireType === 2) {
      const length = reader.uint32();
      const stop = reader.pos + length;
      if (stop > end)
        throw new WireError(`field ${field} of ${message} claims ${length} bytes, past its end`);
      const nested = fields[field];
      if (nested) walk(reader, stop, nested, depth + 1);
      else reader.pos = stop;
    } else if (wireType === 0 || wireType === 1 || wireType === 5) {
      reader.skipType(wireType);
    } else {
      throw new WireError(`wire type ${wireType} (groups are not proto3)`);
    }
    if (reader.pos > end) throw new WireError(`field ${field} of ${message} runs past its end`);
  }
}
