import { validateMeasurement, type ValidMeasurement } from '../../../../shared/ingest.ts';
import { parseTimestampMicros } from '../../../../shared/time.ts';

/**
 * Line formats of serial sensors (docs/gateway.md, "Serial sensors").
 *
 * `kv`: key=value pairs separated by spaces, commas or semicolons, e.g.
 *   `temperature=4.2 humidity=61.5 battery=87`
 *   `id=cellar-2;t=12.5;rh=80;ts=2026-01-05T10:00:00Z`
 * Keys name a measurement type or a common alias (t, temp, h, hum, rh, p, bat, rssi, ...);
 * `<type>.<label>=` sets a label (`temperature.probe2=-18.4`); `battery_v=` is a battery in volts;
 * `device=` or `id=` names the device; `ts=` is RFC 3339 or Unix seconds/milliseconds. Other keys
 * are ignored, and so are values that are not numbers (`nan`, `---`).
 *
 * `vaisala`: the default RS-232 output line of Vaisala HUMICAP/CARBOCAP transmitters
 * (HMT330, HMP155, GMP25x in `SEND`/`R` mode), quantity=value unit, e.g.
 *   `RH= 45.2 %RH T= 22.3 'C Td= 10.1 'C`
 *   `CO2= 812 ppm T= 21.0 'C P= 1013.2 hPa`
 * RH, T (or Ta), P and CO2 are read; other quantities (Td, Tdf, x, a, H2O...) are ignored; 'F is
 * converted to °C and kPa to hPa; a value the transmitter reports as `***` is dropped.
 */
export type LineFormat = 'kv' | 'vaisala';

export interface ParsedLine {
  device: string | null;
  ts: number | null;
  measurements: ValidMeasurement[];
}

export class LineError extends Error {}

const ALIASES: Record<string, string> = {
  t: 'temperature',
  temp: 'temperature',
  temperature: 'temperature',
  h: 'humidity',
  hum: 'humidity',
  rh: 'humidity',
  humidity: 'humidity',
  p: 'pressure',
  pres: 'pressure',
  pressure: 'pressure',
  co2: 'co2',
  v: 'voltage',
  volt: 'voltage',
  voltage: 'voltage',
  i: 'current',
  current: 'current',
  w: 'power',
  power: 'power',
  leak: 'leak',
  water: 'leak',
  bat: 'battery',
  batt: 'battery',
  battery: 'battery',
  rssi: 'signal',
  signal: 'signal',
};
const NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

function lineTime(text: string): number {
  if (/^\d+(\.\d+)?$/.test(text)) {
    const n = Number(text);
    // Unix seconds until 2286; beyond that it must be milliseconds.
    return Math.round(n < 1e10 ? n * 1e6 : n * 1e3);
  }
  const micros = parseTimestampMicros(text);
  if (micros === null) throw new LineError(`ts=${text} is neither RFC 3339 with an offset nor Unix time`);
  return micros;
}

export function parseKvLine(line: string): ParsedLine {
  let device: string | null = null;
  let ts: number | null = null;
  const measurements: ValidMeasurement[] = [];
  for (const pair of line.split(/[\s,;]+/)) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    if (eq <= 0) continue;
    const key = pair.slice(0, eq).toLowerCase();
    const value = pair.slice(eq + 1);
    if (key === 'device' || key === 'id') {
      device = value;
      continue;
    }
    if (key === 'ts' || key === 'time') {
      ts = lineTime(value);
      continue;
    }
    const [name, ...rest] = key.split('.');
    const label = rest.length > 0 ? pair.slice(name!.length + 1, eq) : undefined;
    let type = ALIASES[name!];
    let unit: string | undefined;
    if (name === 'battery_v' || name === 'bat_v') {
      type = 'battery';
      unit = 'V';
    }
    if (!type || !NUMBER.test(value)) continue;
    measurements.push(
      validateMeasurement(
        { type, value: Number(value), ...(label ? { label } : {}), ...(unit ? { unit } : {}) },
        key,
      ),
    );
  }
  return { device, ts, measurements };
}

const VAISALA_PAIR = /([A-Za-z][A-Za-z0-9]*)\s*=\s*(\S+)(?:\s+('?°?[A-Za-z%]+))?/g;

export function parseVaisalaLine(line: string): ParsedLine {
  const measurements: ValidMeasurement[] = [];
  for (const m of line.matchAll(VAISALA_PAIR)) {
    const quantity = m[1]!.toUpperCase();
    const text = m[2]!;
    const unit = (m[3] ?? '').replace('°', "'");
    if (!NUMBER.test(text)) continue;
    let value = Number(text);
    let type: string | null = null;
    if (quantity === 'RH') type = 'humidity';
    else if (quantity === 'T' || quantity === 'TA') {
      type = 'temperature';
      if (unit === "'F") value = Math.round((((value - 32) * 5) / 9) * 100) / 100;
    } else if (quantity === 'P') {
      type = 'pressure';
      if (unit.toLowerCase() === 'kpa') value = value * 10;
    } else if (quantity === 'CO2') type = 'co2';
    if (type) measurements.push(validateMeasurement({ type, value }, quantity));
  }
  return { device: null, ts: null, measurements };
}

export function parseLine(format: LineFormat, line: string): ParsedLine {
  return format === 'kv' ? parseKvLine(line) : parseVaisalaLine(line);
}
