import { formatSeconds, formatSecondsOrNull } from '../../../shared/time.ts';
import type { Tables } from '../storage/schema.ts';
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

/** A row of `alert_events` (migration 0013): an alarm event of an alert rule. */
export type AlertEventRow = Tables['alert_events'];

/** The bounds an alert condition names, shown as the event's `ok_min` / `ok_max` (null: none). */
function boundsOf(condition: Record<string, unknown>): { ok_min: number | null; ok_max: number | null } {
  switch (condition.type) {
    case 'above':
      return { ok_min: null, ok_max: condition.value as number };
    case 'below':
      return { ok_min: condition.value as number, ok_max: null };
    case 'outside':
      return { ok_min: condition.min as number, ok_max: condition.max as number };
    default:
      return { ok_min: null, ok_max: null };
  }
}

/**
 * An alarm event of an alert rule (docs/api/alert-rules.md): the fields of `eventView`, plus
 * `rule_id`, `severity` and `condition` (the condition that fired, as written in the rule, with
 * its `index` in the rule version). Kinds: those of the simple rule, and `rate_of_change`.
 */
export function alertEventView(e: AlertEventRow) {
  const condition = JSON.parse(e.condition) as Record<string, unknown>;
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
    ...boundsOf(condition),
    peak_value: e.peak_value,
    silenced: e.silenced === 1,
    acknowledged_at: formatSecondsOrNull(e.acknowledged_at),
    acknowledged_by: e.acknowledged_by,
    ack_note: e.ack_note,
    withdrawn_at: formatSecondsOrNull(e.withdrawn_at),
    created_at: formatSeconds(e.created_at),
    updated_at: formatSeconds(e.updated_at),
    rule_id: e.rule_id,
    severity: e.severity,
    condition: { index: e.cond, ...condition },
  };
}

/** An event of either table, as the API shows it. */
export function anyEventView(e: AlarmEventRow | AlertEventRow) {
  return 'rule_id' in e ? alertEventView(e) : eventView(e);
}
