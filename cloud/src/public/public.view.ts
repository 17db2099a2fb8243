import { formatMicros, formatSeconds } from '../../../shared/time.ts';
import { modelOf } from '../devices/models.ts';
import type { PinRecord, PublicDeviceRow } from './public.repository.ts';

/**
 * A pin as anyone sees it (docs/api/public.md). Field by field from the record: the owner's
 * account, device and channel ids, `local_id` and tokens never reach an answer.
 */
export function pinView(p: PinRecord) {
  return {
    id: p.id,
    lat: p.lat,
    lon: p.lon,
    kind: p.kind,
    unit: p.unit,
    value: p.value,
    ts: formatMicros(p.ts),
    nickname: p.nickname,
    locationName: p.locationName,
    label: p.label,
  };
}

/** A pin with the device's model and vendor and the organisation its owner published (or null). */
export function pinDetailView(p: PinRecord) {
  return {
    ...pinView(p),
    model: p.model,
    vendor: modelOf(p.model).vendor,
    organisation: p.organisation,
  };
}

/** One bucket of a public reading series: its start and its mean. */
export function readingView(r: { ts: number; value: number }) {
  return { ts: formatSeconds(r.ts), value: r.value };
}

/** What the owner published about a device, as the device object shows it (null: never set). */
export function publicSettingsView(row: PublicDeviceRow | undefined | null) {
  if (!row) return null;
  return {
    enabled: row.enabled === 1,
    nickname: row.nickname,
    location_name: row.location_name,
    lat: row.lat,
    lon: row.lon,
    organisation: row.organisation,
  };
}

export type PublicSettingsView = ReturnType<typeof publicSettingsView>;
