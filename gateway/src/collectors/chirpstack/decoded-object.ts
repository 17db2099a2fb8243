import {
  IngestValidationError,
  validateMeasurement,
  type ValidMeasurement,
} from '../../../../shared/ingest.ts';

/**
 * Maps a decoded LoRaWAN payload object to measurements (docs/api.md: "known
 * field names mapped to types"). Two shapes are understood:
 *
 * - flat objects from vendor codecs, e.g. Dragino LHT65 `{BatV: 3.05, TempC_SHT: 21.3, Hum_SHT: 45.1,
 *   TempC_DS: 4.2}` or Elsys `{temperature: 21.3, humidity: 45, co2: 812, vdd: 3600}`: names are
 *   compared without case, `_` or `-`;
 * - ChirpStack's Cayenne LPP codec, channel maps such as `{temperatureSensor: {"3": 27.2}}`: the
 *   channel number becomes the label.
 *
 * A value that fails the sanity range is dropped (with the reason returned), never clamped.
 */
const FLAT: Record<string, { type: string; label?: string; unit?: string; scale?: number }> = {
  temperature: { type: 'temperature' },
  temp: { type: 'temperature' },
  tempc: { type: 'temperature' },
  tempcsht: { type: 'temperature' },
  temperaturec: { type: 'temperature' },
  tempcds: { type: 'temperature', label: 'ext' },
  externaltemperature: { type: 'temperature', label: 'ext' },
  humidity: { type: 'humidity' },
  hum: { type: 'humidity' },
  humsht: { type: 'humidity' },
  rh: { type: 'humidity' },
  relativehumidity: { type: 'humidity' },
  pressure: { type: 'pressure' },
  barometer: { type: 'pressure' },
  co2: { type: 'co2' },
  voltage: { type: 'voltage' },
  current: { type: 'current' },
  power: { type: 'power' },
  leak: { type: 'leak' },
  waterleak: { type: 'leak' },
  battery: { type: 'battery' },
  batterylevel: { type: 'battery' },
  batterypercent: { type: 'battery' },
  batv: { type: 'battery', unit: 'V' },
  batteryvoltage: { type: 'battery', unit: 'V' },
  vdd: { type: 'battery', unit: 'V', scale: 0.001 },
};

const LPP: Record<string, string> = {
  temperatureSensor: 'temperature',
  humiditySensor: 'humidity',
  barometer: 'pressure',
};

export interface MappedObject {
  measurements: ValidMeasurement[];
  dropped: string[];
}

export function measurementsFromObject(object: Record<string, unknown>): MappedObject {
  const measurements: ValidMeasurement[] = [];
  const dropped: string[] = [];
  const add = (path: string, m: { type: string; value: number; label?: string; unit?: string }) => {
    try {
      measurements.push(validateMeasurement(m, path));
    } catch (err) {
      if (!(err instanceof IngestValidationError)) throw err;
      dropped.push(err.message);
    }
  };
  for (const [key, value] of Object.entries(object)) {
    const lppType = LPP[key];
    if (lppType && typeof value === 'object' && value !== null) {
      for (const [channel, v] of Object.entries(value as Record<string, unknown>)) {
        if (typeof v === 'number') add(`${key}.${channel}`, { type: lppType, value: v, label: channel });
      }
      continue;
    }
    const known = FLAT[key.toLowerCase().replace(/[_-]/g, '')];
    if (!known) continue;
    const raw = typeof value === 'boolean' ? (value ? 1 : 0) : value;
    if (typeof raw !== 'number' || !Number.isFinite(raw)) continue;
    const scaled = known.scale ? Math.round(raw * known.scale * 1000) / 1000 : raw;
    add(key, {
      type: known.type,
      value: scaled,
      ...(known.label ? { label: known.label } : {}),
      ...(known.unit ? { unit: known.unit } : {}),
    });
  }
  return { measurements, dropped };
}

/**
 * Cayenne LPP (reference/protocols.md, "Payload encodings"): `[channel][type][data]...`, big-endian,
 * decoded into the same channel maps ChirpStack's own codec produces. Types the gateway has no
 * measurement for are skipped by their size; an unknown type stops decoding (as ChirpStack's does).
 */
const LPP_TYPES: Record<number, { name: string; size: number; read?: (b: Buffer, o: number) => number }> = {
  0x00: { name: 'digitalInput', size: 1 },
  0x01: { name: 'digitalOutput', size: 1 },
  0x02: { name: 'analogInput', size: 2 },
  0x03: { name: 'analogOutput', size: 2 },
  0x65: { name: 'illuminanceSensor', size: 2 },
  0x66: { name: 'presenceSensor', size: 1 },
  0x67: { name: 'temperatureSensor', size: 2, read: (b, o) => b.readInt16BE(o) / 10 },
  0x68: { name: 'humiditySensor', size: 1, read: (b, o) => b.readUInt8(o) / 2 },
  0x71: { name: 'accelerometer', size: 6 },
  0x73: { name: 'barometer', size: 2, read: (b, o) => b.readUInt16BE(o) / 10 },
  0x86: { name: 'gyrometer', size: 6 },
  0x88: { name: 'gpsLocation', size: 9 },
};

export function decodeCayenneLpp(bytes: Buffer): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {};
  let i = 0;
  while (i + 2 <= bytes.length) {
    const channel = bytes[i]!;
    const type = LPP_TYPES[bytes[i + 1]!];
    if (!type || i + 2 + type.size > bytes.length) break;
    if (type.read) (out[type.name] ??= {})[String(channel)] = type.read(bytes, i + 2);
    i += 2 + type.size;
  }
  return out;
}
