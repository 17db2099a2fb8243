import {
  IngestValidationError,
  validateMeasurement,
  type ValidMeasurement,
  type WireMeasurement,
} from '../ingest.ts';

/**
 * A decoded LoRaWAN payload object turned into measurements: what a network server's codec
 * decoded (ChirpStack `object`, The Things Stack `decoded_payload`) and what our own decoders yield
 * (`payload-decoders.ts`), through one map of known field names. Three shapes are understood:
 *
 * - flat objects of vendor codecs, e.g. Dragino LHT65 `{BatV: 3.05, TempC_SHT: 21.3, Hum_SHT: 45.1,
 *   TempC_DS: 4.2}` or Elsys `{temperature: 21.3, humidity: 45, co2: 812, vdd: 3600}`: names are
 *   compared without case, `_` or `-`;
 * - ChirpStack's Cayenne LPP codec, channel maps such as `{temperatureSensor: {"3": 27.2}}`: the
 *   channel number becomes the label;
 * - The Things Stack's Cayenne LPP formatter, `{temperature_3: 27.2, relative_humidity_5: 40}`: a
 *   trailing `_<channel>` becomes the label.
 *
 * A value outside its kind's sanity range is dropped (with the reason returned), never clamped; a
 * field the map does not know is returned in `unknown` for the caller to report.
 */
interface FieldMeaning {
  type: string;
  label?: string;
  unit?: string;
  /** The value is multiplied by this (Elsys reports its supply in mV). */
  scale?: number;
}

const FIELDS: Record<string, FieldMeaning> = {
  temperature: { type: 'temperature' },
  temp: { type: 'temperature' },
  tempc: { type: 'temperature' },
  tempcsht: { type: 'temperature' },
  temperaturec: { type: 'temperature' },
  temperaturesensor: { type: 'temperature' },
  tempcds: { type: 'temperature', label: 'ext' },
  externaltemperature: { type: 'temperature', label: 'ext' },
  externaltemperature2: { type: 'temperature', label: 'ext2' },
  humidity: { type: 'humidity' },
  hum: { type: 'humidity' },
  humsht: { type: 'humidity' },
  rh: { type: 'humidity' },
  relativehumidity: { type: 'humidity' },
  humiditysensor: { type: 'humidity' },
  pressure: { type: 'pressure' },
  barometer: { type: 'pressure' },
  barometricpressure: { type: 'pressure' },
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

/**
 * Fields vendor codecs send that carry no measurement of ours (status bits, counters, light): known,
 * so they are not reported as unknown.
 */
const IGNORED = new Set([
  'batstatus',
  'extsensor',
  'extnoconnection',
  'light',
  'illuminance',
  'illuminancesensor',
  'motion',
  'acceleration',
  'accelerometer',
  'gyrometer',
  'gpslocation',
  'gps',
  'digitalinput',
  'digitaloutput',
  'analoginput',
  'analogoutput',
  'digitalin',
  'digitalout',
  'analogin',
  'analogout',
  'luminosity',
  'presencesensor',
  'presence',
  'tvoc',
  'occupancy',
  'digital',
  'digital2',
  'analog1',
  'analog2',
  'pulse1',
  'pulse2',
  'pulseabs',
  'pulseabs2',
  'distance',
  'accmotion',
  'soundpeak',
  'soundavg',
  'irinternaltemperature',
  'irexternaltemperature',
  'analoguv',
  'genericsensor',
  'frequency',
  'percentage',
  'altitude',
  'energy',
  'direction',
  'unixtime',
  'switch',
  'colour',
]);

export interface MappedObject {
  measurements: ValidMeasurement[];
  /** Why values of known fields were dropped (out of their sanity range, or not a number). */
  dropped: string[];
  /** Top-level fields the map does not know. */
  unknown: string[];
}

const normalise = (key: string) => key.toLowerCase().replace(/[_-]/g, '');

/** A known field name with a trailing `_<channel>` (The Things Stack's LPP names). */
function withChannel(key: string): { meaning: FieldMeaning; channel: string } | null {
  const match = /^(.*?)_(\d{1,3})$/.exec(key);
  if (!match) return null;
  const meaning = FIELDS[normalise(match[1]!)];
  return meaning ? { meaning, channel: match[2]! } : null;
}

/** A decimal number written as text, as many vendors' codecs write their values (`"21.5"`). */
const DECIMAL = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/**
 * A known field's value as a number: a number, a boolean (1 or 0) or a decimal in a string; null
 * when it is none of these (`null` is a codec's "no reading"; anything else is reported dropped).
 */
function numeric(value: unknown): number | null {
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (typeof value === 'string' && DECIMAL.test(value.trim())) return Number(value.trim());
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

export function measurementsFromObject(object: Record<string, unknown>): MappedObject {
  const measurements: ValidMeasurement[] = [];
  const dropped: string[] = [];
  const unknown: string[] = [];
  /** A known field's value that is not a number: reported, so a codec's wrong output is seen in the log. */
  const notNumber = (path: string, value: unknown) => {
    if (value !== null) dropped.push(`${path}: not a number (${JSON.stringify(value)?.slice(0, 40)})`);
  };
  const add = (path: string, meaning: FieldMeaning, value: number, label?: string) => {
    const scaled = meaning.scale ? Math.round(value * meaning.scale * 1000) / 1000 : value;
    const m: WireMeasurement = { type: meaning.type, value: scaled };
    const l = label ?? meaning.label;
    if (l !== undefined) m.label = l;
    if (meaning.unit) m.unit = meaning.unit;
    try {
      measurements.push(validateMeasurement(m, path));
    } catch (err) {
      if (!(err instanceof IngestValidationError)) throw err;
      dropped.push(`${path}: ${err.message}`);
    }
  };
  for (const [key, value] of Object.entries(object)) {
    const name = normalise(key);
    const meaning = FIELDS[name];
    if (meaning && typeof value === 'object' && value !== null && !Array.isArray(value)) {
      // ChirpStack's LPP channel map: {"3": 27.2, "5": 25.5}
      for (const [channel, v] of Object.entries(value as Record<string, unknown>)) {
        const n = numeric(v);
        if (n !== null) add(`${key}.${channel}`, meaning, n, channel);
        else notNumber(`${key}.${channel}`, v);
      }
      continue;
    }
    if (meaning && Array.isArray(value)) {
      // a repeated field (Elsys externalTemperature2): one label per position
      value.forEach((v, i) => {
        const n = numeric(v);
        if (n !== null) add(`${key}.${i}`, meaning, n, `${meaning.label ?? name}.${i + 1}`);
        else notNumber(`${key}.${i}`, v);
      });
      continue;
    }
    if (meaning) {
      const n = numeric(value);
      if (n !== null) add(key, meaning, n);
      else notNumber(key, value);
      continue;
    }
    const channelled = withChannel(key);
    if (channelled) {
      const n = numeric(value);
      if (n !== null) add(key, channelled.meaning, n, channelled.channel);
      else notNumber(key, value);
      continue;
    }
    const base = /^(.*?)_\d{1,3}$/.exec(key)?.[1];
    if (IGNORED.has(name) || (base !== undefined && IGNORED.has(normalise(base)))) continue;
    unknown.push(key);
  }
  return { measurements, dropped, unknown };
}
