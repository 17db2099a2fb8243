import { formatSeconds, formatSecondsOrNull } from '../../../shared/time.ts';
import type { AlarmEventRow } from './events.repository.ts';

/**
 * An alarm event as the API, the webhooks and the export show it (docs/api/rules.md), plus `alarm_at`, `withdrawn_at`, `created_at` and `updated_at`.
 * `state` is `open` until the condition ends (or the data no longer supports the event).
 */
export function eventView(e: AlarmEventRow) {
  return {
    id: e.id,
    kind: e.kind,
    sensor_id: e.sensor_id,
    channel_id: e.channel_id,
    device_id: e.device_id,
    site_id: e.site_id,
    state: e.ended_at === null && e.withdrawn_at === null ? ('open' as const) : ('resolved' as const),
    started_at: formatSeconds(e.started_at),
    alarm_at: formatSeconds(e.alarm_at),
    ended_at: formatSecondsOrNull(e.ended_at),
    ok_min: e.ok_min,
    ok_max: e.ok_max,
    peak_value: e.peak_value,
    silenced: e.silenced === 1,
    acknowledged_at: formatSecondsOrNull(e.acknowledged_at),
    acknowledged_by: e.acknowledged_by,
    ack_note: e.ack_note,
    withdrawn_at: formatSecondsOrNull(e.withdrawn_at),
    created_at: formatSeconds(e.created_at),
    updated_at: formatSeconds(e.updated_at),
  };
}

export type EventView = ReturnType<typeof eventView>;
