/** The objects the cloud answers with (docs/api/resources.md, docs/api/rules.md), as the pages read them. */

export interface Site {
  id: string;
  name: string;
  vertical: string;
  timezone: string;
  created_at: string;
}

/** What the owner shares of a device on the public map (docs/api/public.md); null: never set. */
export interface PublicSettings {
  enabled: boolean;
  nickname: string | null;
  location_name: string | null;
  lat: number | null;
  lon: number | null;
  organisation: string | null;
}

export interface Device {
  id: string;
  site_id: string;
  local_id: string;
  name: string | null;
  notes: string | null;
  model: string;
  fw_version: string | null;
  ingest_url_kind: string;
  last_seen_at: string | null;
  online: boolean;
  created_at: string;
  public: PublicSettings | null;
}

export interface Sensor {
  id: string;
  channel_id: string;
  device_id: string;
  kind: string;
  label: string;
  unit: string;
  ok_min: number;
  ok_max: number;
  grace_min: number;
  rule_enabled: boolean;
  no_data_min: number;
  last_value: number | null;
  last_ts: string | null;
  state: string;
  /** The worst severity of the channel's open alert-rule alarms, or null. */
  alert_severity: 'warning' | 'critical' | null;
  created_at: string;
}

/** One condition of an alert rule (docs/api/alert-rules.md). */
export interface AlertCondition {
  type: string;
  severity: 'warning' | 'critical';
  value?: number;
  min?: number;
  max?: number;
  minutes?: number;
  change?: number;
  within_min?: number;
  direction?: 'rise' | 'fall' | 'any';
  delay_min?: number;
  hysteresis?: number;
}

export interface AlertRule {
  id: string;
  name: string;
  enabled: boolean;
  channel_ids: string[] | null;
  site_id: string | null;
  kind: string | null;
  conditions: AlertCondition[];
  notify: {
    steps: { after_min: number; user_ids: string[]; webhook_ids: string[]; chat: unknown[] }[];
    repeat_every_min: number | null;
  };
}

export interface AlarmEvent {
  id: string;
  kind: string;
  sensor_id: string;
  channel_id: string;
  device_id: string;
  site_id: string;
  state: 'open' | 'resolved';
  started_at: string;
  alarm_at: string | null;
  ended_at: string | null;
  ok_min: number | null;
  ok_max: number | null;
  peak_value: number | null;
  silenced: boolean;
  acknowledged_at: string | null;
  acknowledged_by: string | null;
  ack_note: string | null;
  withdrawn_at: string | null;
  created_at: string;
  updated_at: string;
  /** Alarms of alert rules only: the rule, its severity and the condition that fired. */
  rule_id?: string | null;
  severity?: 'warning' | 'critical' | null;
  condition?: (AlertCondition & { index: number }) | null;
}

/**
 * The unit `boolean` is a leak sensor's (shared/kinds.ts): 1 is water detected, 0 dry. Its values
 * are words, never "1.0 boolean".
 */
export const isLeakUnit = (unit: string | undefined) => unit === 'boolean';

/** A unit after a number (" °C"), nothing for a leak sensor's 0 and 1. */
export const unitSuffix = (unit: string | undefined) => (unit && !isLeakUnit(unit) ? ` ${unit}` : '');

/** A unit as a form field's label names it: "°C", "0 dry, 1 leak". */
export const unitHint = (unit: string) => (isLeakUnit(unit) ? '0 dry, 1 leak' : unit);

/** A value with its unit, rounded as a thermometer shows it; a leak sensor's as "Leak" or "Dry". */
export function formatValue(value: number | null | undefined, unit: string): string {
  if (value === null || value === undefined) return '–';
  if (isLeakUnit(unit)) return value > 0 ? 'Leak' : 'Dry';
  const digits = Math.abs(value) >= 100 ? 0 : 1;
  return `${value.toFixed(digits)} ${unit}`.trim();
}

/** A device's name, else its local id. */
export const deviceName = (d: Pick<Device, 'name' | 'local_id'>) => d.name || d.local_id;
