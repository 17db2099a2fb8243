import type { Selectable } from 'kysely';
import { formatMicros, formatSeconds } from '../../../shared/time.ts';
import type { Tables } from '../storage/schema.ts';

/**
 * A sensor as the API shows it: the last measurement's time in RFC 3339 UTC to the microsecond,
 * other times to the second, `rule_enabled` as a boolean. `state` is the simple rule's;
 * `alert_severity` is the worst severity among the open alarms of alert rules on the channel
 * (`warning`, `critical`, or null when none is open).
 */
export function sensorView(
  s: Selectable<Tables['sensors']>,
  alertSeverity: 'warning' | 'critical' | null = null,
) {
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
    alert_severity: alertSeverity,
    created_at: formatSeconds(s.created_at),
  };
}
