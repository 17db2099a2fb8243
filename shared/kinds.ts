/**
 * Measurement kinds, their default units and the sanity ranges checked at ingest
 * (docs/api/ingest.md and "Sanity ranges checked at ingest").
 */
export const MEASUREMENT_KINDS = [
  'temperature',
  'humidity',
  'pressure',
  'co2',
  'voltage',
  'current',
  'power',
  'leak',
  'battery',
  'signal',
] as const;

export type MeasurementKind = (typeof MEASUREMENT_KINDS)[number];

export const DEFAULT_UNITS: Readonly<Record<MeasurementKind, string>> = {
  temperature: '°C',
  humidity: '%',
  pressure: 'hPa',
  co2: 'ppm',
  voltage: 'V',
  current: 'A',
  power: 'W',
  leak: 'boolean',
  battery: '%',
  signal: 'dBm',
};

export interface SanityRange {
  readonly min: number;
  readonly max: number;
}

const RANGES: Readonly<Record<MeasurementKind, SanityRange>> = {
  temperature: { min: -80, max: 200 },
  humidity: { min: 0, max: 100 },
  pressure: { min: 300, max: 1100 },
  co2: { min: 0, max: 10000 },
  voltage: { min: 0, max: 1000 },
  current: { min: -500, max: 500 },
  power: { min: -50000, max: 50000 },
  leak: { min: 0, max: 1 },
  battery: { min: 0, max: 100 },
  signal: { min: -150, max: 0 },
};

const BATTERY_VOLTS: SanityRange = { min: 0.5, max: 60 };

export function isMeasurementKind(value: unknown): value is MeasurementKind {
  return typeof value === 'string' && (MEASUREMENT_KINDS as readonly string[]).includes(value);
}

/** The unit a measurement is stored with: the sender's override, else the kind's default. */
export function unitFor(kind: MeasurementKind, unit: string | undefined | null): string {
  return unit ?? DEFAULT_UNITS[kind];
}

/**
 * The range a value is checked against. Ranges apply to the value as sent whatever its unit says,
 * except battery in volts (docs/api.md).
 */
export function sanityRange(kind: MeasurementKind, unit: string | undefined | null): SanityRange {
  if (kind === 'battery' && unit === 'V') return BATTERY_VOLTS;
  return RANGES[kind];
}

/** Whether a value is acceptable for its kind; `leak` takes only 0 and 1. */
export function isWithinSanityRange(kind: MeasurementKind, value: number, unit?: string | null): boolean {
  if (kind === 'leak') return value === 0 || value === 1;
  const range = sanityRange(kind, unit);
  return value >= range.min && value <= range.max;
}
