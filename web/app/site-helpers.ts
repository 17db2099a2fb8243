/** Helpers of the site, device and overview pages. */
import type { Sensor } from './types.ts';

/** A sensor's label, else its kind ("Temperature"). */
export function sensorName(s: Pick<Sensor, 'label' | 'kind'>): string {
  const kind = s.kind.replace(/_/g, ' ');
  const Kind = s.kind === 'co2' ? 'CO₂' : kind.charAt(0).toUpperCase() + kind.slice(1);
  // A bare number is a channel's index (Cayenne LPP, LoRaWAN decoders): "Temperature 1", not "1".
  if (s.label && /^\d+$/.test(s.label)) return `${Kind} ${s.label}`;
  return s.label || Kind;
}

/**
 * The site verticals (docs/api/resources.md), with what each sets up: a vertical gives the default
 * rule of every channel created on the site's devices. The cloud validates the choice.
 */
export const VERTICALS: { value: string; label: string; hint: string }[] = [
  { value: 'food_service', label: 'Food service', hint: 'Kitchens and fridges: 0 to 5 °C' },
  { value: 'frozen_storage', label: 'Frozen storage', hint: 'Freezers and cold stores: −30 to −18 °C' },
  { value: 'pharma', label: 'Pharmacy', hint: 'Medicine fridges: 2 to 8 °C, humidity up to 60 %' },
  { value: 'greenhouse', label: 'Greenhouse', hint: '5 to 35 °C, humidity 40 to 90 %' },
  { value: 'server_room', label: 'Server room', hint: '18 to 27 °C, humidity 20 to 80 %' },
  { value: 'office', label: 'Office', hint: '18 to 26 °C, humidity 30 to 60 %, CO₂ up to 1000 ppm' },
  { value: 'home', label: 'Home', hint: '16 to 28 °C, humidity 30 to 70 %, CO₂ up to 1400 ppm' },
  { value: 'generic', label: 'Generic', hint: 'No thresholds: set your own on each sensor' },
];

export const verticalLabel = (v: string) => VERTICALS.find((x) => x.value === v)?.label ?? v;

/** The IANA time zones the browser knows, UTC first. */
export function timeZones(): string[] {
  const known =
    typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : ['Europe/Berlin'];
  return ['UTC', ...known.filter((z) => z !== 'UTC')];
}

/** The browser's own time zone (the default for a new site). */
export function browserTimeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

/** The sensors that describe a device's health rather than the place (the site page shows them per device). */
export const HEALTH_KINDS: ReadonlySet<string> = new Set(['battery', 'signal']);
