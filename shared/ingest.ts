import { z } from 'zod';
import {
  MEASUREMENT_KINDS,
  isMeasurementKind,
  isWithinSanityRange,
  unitFor,
  type MeasurementKind,
} from './kinds.ts';
import { parseTimestampMicros } from './time.ts';

/**
 * The ingest body (docs/api/ingest.md), its validation and its error codes, shared by every
 * way in: the cloud's HTTP and MQTT adapters validate with it, and the gateway validates a reading
 * with it before buffering, so nothing is queued that the cloud would refuse forever.
 */
export const MAX_MEASUREMENTS = 32;
export const MAX_TEXT = 64;
/** Readings older than this are refused: a device whose clock was never set sends 1970. */
export const EARLIEST_TS_MICROS = Date.UTC(2000, 0, 1) * 1000;
/** Readings further in the future than this are refused: a wrong clock would plant them ahead of all data. */
export const MAX_FUTURE_MICROS = 24 * 3600 * 1_000_000;

/**
 * The wire format as a zod schema: the type, the API description (OpenAPI) and the reference the
 * hand-written validator below is tested against (test/shared/ingest.unit.test.ts). The validator exists
 * because the spec gives each failure its own code (no_measurements, invalid_measurement,
 * unknown_kind, out_of_range) and "the first failing measurement wins".
 */
export const MeasurementSchema = z.object({
  type: z.enum(MEASUREMENT_KINDS),
  value: z.number(),
  label: z.string().max(MAX_TEXT).nullish(),
  unit: z.string().max(MAX_TEXT).nullish(),
});

export const IngestBodySchema = z.object({
  device: z.string().min(1).max(128).optional().describe('local id of the device; X-Device-Id overrides it'),
  ts: z
    .string()
    .meta({ format: 'date-time' })
    .optional()
    .describe('RFC 3339 with offset; default: server receive time'),
  measurements: z.array(MeasurementSchema).min(1).max(MAX_MEASUREMENTS),
});

/** A measurement as sent on the wire. */
export interface WireMeasurement {
  type: string;
  value: number;
  label?: string;
  unit?: string;
}

/** The `POST /v1/ingest` body; over MQTT the same without `device`. */
export interface IngestBody {
  device?: string;
  ts?: string;
  measurements: WireMeasurement[];
}

/** A measurement that passed validation. */
export interface ValidMeasurement {
  kind: MeasurementKind;
  value: number;
  /** null when none was sent */
  label: string | null;
  unit: string;
}

export interface ValidIngest {
  /** The device named by the request (body `device` or the `X-Device-Id` override); null when none. */
  device: string | null;
  /** Microseconds since the epoch, or null for "now" (server receive time). */
  ts: number | null;
  measurements: ValidMeasurement[];
}

export type IngestErrorCode =
  | 'bad_json'
  | 'invalid_request'
  | 'invalid_measurement'
  | 'no_measurements'
  | 'unknown_kind'
  | 'out_of_range'
  | 'invalid_characters';

export class IngestValidationError extends Error {
  readonly status: 400 | 422;
  constructor(
    readonly code: IngestErrorCode,
    message: string,
    readonly path: string,
  ) {
    super(message);
    this.status =
      code === 'unknown_kind' || code === 'out_of_range' || code === 'invalid_characters' ? 422 : 400;
  }
}

/**
 * U+0000 in text: no database column of ours can hold it (PostgreSQL's text type refuses it), and no
 * device name or label needs it. Refused with 422, a final answer, so a device does not resend it.
 */
export function hasNul(text: string): boolean {
  return text.includes('\u0000');
}

/** Throws 422 `invalid_characters` for `path` when `text` holds U+0000. */
export function refuseNulText(text: string, path: string): void {
  if (hasNul(text)) {
    throw new IngestValidationError('invalid_characters', `${path} must not contain U+0000 (NUL)`, path);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Checks one measurement; the first failing rule wins (shape 400, then kind 422, then range 422). */
export function validateMeasurement(m: unknown, path: string): ValidMeasurement {
  if (!isObject(m)) throw new IngestValidationError('invalid_measurement', `${path} must be an object`, path);
  if (m.type === undefined || m.value === undefined) {
    throw new IngestValidationError('invalid_measurement', `${path} needs both type and value`, path);
  }
  if (typeof m.type !== 'string')
    throw new IngestValidationError('invalid_measurement', `${path}.type must be a string`, `${path}.type`);
  if (typeof m.value !== 'number' || !Number.isFinite(m.value)) {
    throw new IngestValidationError(
      'invalid_measurement',
      `${path}.value must be a finite number`,
      `${path}.value`,
    );
  }
  for (const field of ['label', 'unit'] as const) {
    const v = m[field];
    if (v !== undefined && v !== null && (typeof v !== 'string' || v.length > MAX_TEXT)) {
      throw new IngestValidationError(
        'invalid_measurement',
        `${path}.${field} must be a string of at most ${MAX_TEXT} characters`,
        `${path}.${field}`,
      );
    }
  }
  for (const field of ['label', 'unit'] as const) {
    const v = m[field];
    if (typeof v === 'string') refuseNulText(v, `${path}.${field}`);
  }
  if (!isMeasurementKind(m.type)) {
    throw new IngestValidationError(
      'unknown_kind',
      `${path}.type ${JSON.stringify(m.type)} is not a supported type`,
      `${path}.type`,
    );
  }
  const label = typeof m.label === 'string' && m.label !== '' ? m.label : null;
  const sentUnit = typeof m.unit === 'string' && m.unit !== '' ? m.unit : null;
  if (!isWithinSanityRange(m.type, m.value, sentUnit)) {
    throw new IngestValidationError(
      'out_of_range',
      `${path}.value ${m.value} is outside the sanity range of ${m.type}${m.type === 'leak' ? ' (0 or 1)' : ''}`,
      `${path}.value`,
    );
  }
  return { kind: m.type, value: m.value, label, unit: unitFor(m.type, sentUnit) };
}

/** Parses an RFC 3339 `ts` and checks it is plausible relative to `nowMicros`. */
export function validateTimestamp(ts: unknown, nowMicros: number, path = 'ts'): number {
  const micros = typeof ts === 'string' ? parseTimestampMicros(ts) : null;
  if (micros === null) {
    throw new IngestValidationError(
      'invalid_request',
      `${path} must be an RFC 3339 timestamp with an offset`,
      path,
    );
  }
  if (micros < EARLIEST_TS_MICROS) {
    throw new IngestValidationError(
      'invalid_request',
      `${path} is before 2000-01-01: is the device clock set?`,
      path,
    );
  }
  if (micros > nowMicros + MAX_FUTURE_MICROS) {
    throw new IngestValidationError('invalid_request', `${path} is more than a day in the future`, path);
  }
  return micros;
}

/**
 * The device a body names: the `X-Device-Id` override, else `device`. Read on its own so that a
 * request naming another device is refused (403) before its body is judged (400/422).
 */
export function ingestDeviceRef(body: unknown, deviceOverride?: string): string | null {
  if (deviceOverride !== undefined && deviceOverride !== '') {
    refuseNulText(deviceOverride, 'X-Device-Id');
    return deviceOverride;
  }
  if (!isObject(body) || body.device === undefined || body.device === null) return null;
  if (typeof body.device !== 'string' || body.device === '' || body.device.length > 128) {
    throw new IngestValidationError(
      'invalid_request',
      'device must be a non-empty string of at most 128 characters',
      'device',
    );
  }
  refuseNulText(body.device, 'device');
  return body.device;
}

/**
 * Validates an ingest body. `deviceOverride` is the `X-Device-Id` header; `requireDevice` is false
 * over MQTT, where the topic names the device.
 */
export function validateIngestBody(
  body: unknown,
  options: { nowMicros: number; deviceOverride?: string | undefined; requireDevice?: boolean },
): ValidIngest {
  if (!isObject(body))
    throw new IngestValidationError('invalid_request', 'the body must be a JSON object', '(root)');
  const device = ingestDeviceRef(body, options.deviceOverride);
  if (device === null && options.requireDevice !== false) {
    throw new IngestValidationError(
      'invalid_request',
      'device is required (in the body or as X-Device-Id)',
      'device',
    );
  }
  const ts = body.ts === undefined || body.ts === null ? null : validateTimestamp(body.ts, options.nowMicros);
  const list = body.measurements;
  if (list === undefined || list === null || (Array.isArray(list) && list.length === 0)) {
    throw new IngestValidationError(
      'no_measurements',
      'measurements must hold 1 to 32 entries',
      'measurements',
    );
  }
  if (!Array.isArray(list)) {
    throw new IngestValidationError('invalid_measurement', 'measurements must be an array', 'measurements');
  }
  if (list.length > MAX_MEASUREMENTS) {
    throw new IngestValidationError(
      'invalid_measurement',
      `measurements holds ${list.length} entries; at most ${MAX_MEASUREMENTS} are allowed per request`,
      'measurements',
    );
  }
  const measurements = list.map((m, i) => validateMeasurement(m, `measurements[${i}]`));
  return { device, ts, measurements };
}
