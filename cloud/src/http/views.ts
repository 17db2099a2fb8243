import type { Selectable } from 'kysely';
import { formatMicros, formatSeconds, formatSecondsOrNull } from '../../../shared/time.ts';
import { modelOf } from '../devices/models.ts';
import type { Tables } from '../storage/schema.ts';

/**
 * Rows as the API shows them: ids, RFC 3339 UTC times (microseconds for measurement times,
 * seconds elsewhere), booleans as booleans.
 */
export function siteView(s: Tables['sites']) {
  return {
    id: s.id,
    name: s.name,
    vertical: s.vertical,
    timezone: s.timezone,
    created_at: formatSeconds(s.created_at),
  };
}

export function deviceView(d: Tables['devices']) {
  return {
    id: d.id,
    site_id: d.site_id,
    local_id: d.local_id,
    name: d.name,
    notes: d.notes,
    model: d.model,
    fw_version: d.fw_version,
    ingest_url_kind: modelOf(d.model).ingest_url_kind,
    last_seen_at: formatSecondsOrNull(d.last_seen_at),
    online: d.online === 1,
    created_at: formatSeconds(d.created_at),
  };
}

export function sensorView(s: Selectable<Tables['sensors']>) {
  return {
    id: s.id,
    channel_id: s.channel_id,
    device_id: s.device_id,
    kind: s.kind,
    label: s.label,
    unit: s.unit,
    ok_min: s.ok_min,
    ok_max: s.ok_max,
    grace_min: s.grace_min,
    rule_enabled: s.rule_enabled === 1,
    no_data_min: s.no_data_min,
    last_value: s.last_value,
    last_ts: s.last_ts === null ? null : formatMicros(s.last_ts),
    state: s.state,
    created_at: formatSeconds(s.created_at),
  };
}

export function auditView(a: Tables['audit_log']) {
  return {
    id: a.id,
    ts: formatSeconds(a.ts),
    kind: a.kind,
    by: a.actor,
    target: a.target,
    details: JSON.parse(a.details) as unknown,
  };
}
