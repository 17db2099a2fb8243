import { z } from 'zod';
import { isWithinSanityRange } from './kinds.ts';
import { IngestValidationError, validateTimestamp, type ValidMeasurement } from './ingest.ts';

/**
 * The Shelly "URL action" query (`GET /v1/ingest/shelly`, and the gateway's local listener):
 * `temp`, `hum`, `battery`, `signal`, `ts`, `lwt`. Shelly firmware substitutes `$temperature` etc.;
 * a value it could not substitute arrives verbatim (`$temperature`, `${ev.tC}`), or as `nan`/`null`,
 * and is dropped silently (docs/api/ingest.md).
 */
/** The query as the API describes it (OpenAPI); `parseShellyQuery` is the validator. */
export const ShellyQuerySchema = z.object({
  token: z.string().optional().describe('device token (or Authorization: Bearer)'),
  device: z.string().describe('local id of the device'),
  temp: z.string().optional().describe('temperature °C; one of temp/hum'),
  hum: z.string().optional().describe('humidity %; one of temp/hum'),
  battery: z.string().optional().describe('percent, or volts (third generation, or at most 6)'),
  signal: z.string().optional().describe('RSSI dBm'),
  ts: z.string().optional().describe('RFC 3339; default: server receive time'),
  lwt: z.enum(['online', 'offline']).optional(),
});

export interface ShellyReading {
  device: string | null;
  ts: number | null;
  /** temperature, humidity and signal, validated */
  measurements: ValidMeasurement[];
  /** The raw battery value; its unit depends on the device model (see `shellyBatteryMeasurement`). */
  battery: number | null;
  lwt: 'online' | 'offline' | null;
}

const NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/** A query value as a number, or null when it is not one (dropped, never an error). */
export function shellyNumber(value: unknown): number | null {
  if (typeof value !== 'string') return null;
  const text = value.trim();
  if (!NUMBER.test(text)) return null;
  const n = Number(text);
  return Number.isFinite(n) ? n : null;
}

function checked(
  kind: 'temperature' | 'humidity' | 'signal',
  value: number,
  param: string,
): ValidMeasurement {
  if (!isWithinSanityRange(kind, value)) {
    throw new IngestValidationError(
      'out_of_range',
      `${param}=${value} is outside the sanity range of ${kind}`,
      param,
    );
  }
  const unit = { temperature: '°C', humidity: '%', signal: 'dBm' }[kind];
  return { kind, value, label: null, unit };
}

export function parseShellyQuery(query: Record<string, unknown>, nowMicros: number): ShellyReading {
  const device = typeof query.device === 'string' && query.device !== '' ? query.device : null;
  const lwtRaw = query.lwt;
  let lwt: ShellyReading['lwt'] = null;
  if (lwtRaw !== undefined) {
    if (lwtRaw !== 'online' && lwtRaw !== 'offline') {
      throw new IngestValidationError('invalid_request', 'lwt must be online or offline', 'lwt');
    }
    lwt = lwtRaw;
  }
  const ts = typeof query.ts === 'string' && query.ts !== '' ? validateTimestamp(query.ts, nowMicros) : null;
  const measurements: ValidMeasurement[] = [];
  const temp = shellyNumber(query.temp);
  if (temp !== null) measurements.push(checked('temperature', temp, 'temp'));
  const hum = shellyNumber(query.hum);
  if (hum !== null) measurements.push(checked('humidity', hum, 'hum'));
  const signal = shellyNumber(query.signal);
  // Signal and battery only travel with a reading: "at least one of temp, hum" (docs/api.md).
  if (measurements.length === 0 && lwt === null) {
    throw new IngestValidationError('no_measurements', 'send temp or hum (a number)', 'temp');
  }
  if (signal !== null && measurements.length > 0) measurements.push(checked('signal', signal, 'signal'));
  const battery = measurements.length > 0 ? shellyNumber(query.battery) : null;
  return { device, ts, measurements, battery, lwt };
}

/**
 * Shelly battery: volts for third-generation models or values of at most 6, else percent
 * (docs/api/ingest.md).
 */
export function shellyBatteryMeasurement(value: number, modelReportsVolts: boolean): ValidMeasurement {
  const unit = modelReportsVolts || value <= 6 ? 'V' : '%';
  if (!isWithinSanityRange('battery', value, unit)) {
    throw new IngestValidationError(
      'out_of_range',
      `battery=${value} is outside the sanity range of battery (${unit})`,
      'battery',
    );
  }
  return { kind: 'battery', value, label: null, unit };
}
