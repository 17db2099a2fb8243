import { formatSeconds } from '../../../shared/time.ts';
import type { AlarmEventRow } from '../events/events.repository.ts';

/** Where an alarm happened, in the words people use on site. */
export interface AlarmContext {
  siteName: string;
  timezone: string;
  deviceName: string;
  localId: string;
  sensorKind: string;
  sensorLabel: string | null;
  unit: string;
}

/** `2026-01-05 11:00:00 Europe/Berlin (2026-01-05T10:00:00Z)`: the site's local time, and UTC. */
export function localTime(micros: number, timezone: string): string {
  const local = new Intl.DateTimeFormat('sv-SE', {
    timeZone: timezone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hour12: false,
  }).format(new Date(Math.floor(micros / 1000)));
  return `${local} ${timezone} (${formatSeconds(micros)})`;
}

function withUnit(value: number, unit: string): string {
  return unit === 'boolean' ? String(value) : `${value} ${unit}`;
}

/**
 * A boolean sensor (a leak sensor: 1 wet, 0 dry) is in alarm because it detects what it senses, or
 * stops detecting it; "above 0" says nothing to the person who must mop the floor.
 */
function condition(e: AlarmEventRow, c: AlarmContext): string {
  const boolean = c.unit === 'boolean';
  if (e.kind === 'threshold_high') return boolean ? 'detected' : `above ${withUnit(e.ok_max, c.unit)}`;
  if (e.kind === 'threshold_low')
    return boolean ? 'no longer detected' : `below ${withUnit(e.ok_min, c.unit)}`;
  return 'sending no data';
}

/**
 * The alarm e-mail: what (the condition and its peak), where (site, device, sensor), since when
 * (in the site's time zone and UTC), the bounds in force, and a link to the event in the dashboard.
 * One mail per change people must hear about: opened, resolved, both at once (an alarm found in
 * late data that is already over), or withdrawn (late data showed it did not happen).
 */
export function alarmMail(
  e: AlarmEventRow,
  c: AlarmContext,
  change: { opened: boolean; resolved: boolean },
  dashboardUrl: string,
): { subject: string; text: string } {
  const sensor = c.sensorLabel ? `${c.sensorKind} (${c.sensorLabel})` : c.sensorKind;
  const what = `${c.deviceName} ${sensor} ${condition(e, c)}`;
  const prefix =
    e.withdrawn_at !== null
      ? 'Withdrawn'
      : change.opened && change.resolved
        ? 'Alarm (already over)'
        : change.opened
          ? 'ALARM'
          : 'Resolved';
  const subject = `${prefix}: ${what} at ${c.siteName}`;
  const lines: string[] = [];
  if (e.withdrawn_at !== null) {
    lines.push(
      `Measurements that arrived late show that this alarm did not happen as reported; it is withdrawn.`,
      '',
    );
  } else if (!change.opened) {
    lines.push(`The alarm below has ended.`, '');
  }
  const peak =
    e.peak_value === null || c.unit === 'boolean'
      ? ''
      : `, ${e.kind === 'threshold_low' ? 'lowest' : 'highest'} ${withUnit(e.peak_value, c.unit)}`;
  lines.push(
    `What:    ${sensor} ${condition(e, c)} (${e.kind})${peak}`,
    `Where:   site ${c.siteName}, device ${c.deviceName} (${c.localId}), sensor ${sensor}`,
    `Since:   ${localTime(e.started_at, c.timezone)}`,
  );
  if (e.alarm_at !== e.started_at)
    lines.push(`Alarm:   ${localTime(e.alarm_at, c.timezone)} (after the grace period)`);
  if (e.ended_at !== null) lines.push(`Ended:   ${localTime(e.ended_at, c.timezone)}`);
  lines.push(
    c.unit === 'boolean'
      ? `Bounds:  ${e.ok_max === 0 ? 'alarm when detected (1)' : `OK from ${e.ok_min} to ${e.ok_max}`}`
      : `Bounds:  ${withUnit(e.ok_min, c.unit)} to ${withUnit(e.ok_max, c.unit)}`,
    ...(e.silenced === 1
      ? ['Note:    the alarm began inside a silence window; it is announced because it outlasted it.']
      : []),
    '',
    `Open it in the dashboard: ${dashboardUrl}`,
    `Event id: ${e.id}`,
  );
  return { subject, text: `${lines.join('\n')}\n` };
}
