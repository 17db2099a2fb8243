import { DateTime } from 'luxon';

/**
 * An alert rule's active schedule (docs/api/alert-rules.md): weekly windows in a time zone. Outside
 * every window the rule opens no alarm; an excursion that is still on when a window begins opens its
 * alarm then. Windows are wall-clock times (luxon applies the zone's offsets and DST changes); a
 * window whose `to` is at or before its `from` runs over midnight into the next day, and `24:00`
 * is the end of the day.
 */

export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

export interface WeeklyWindow {
  days: Weekday[];
  /** `HH:MM`, 00:00 to 23:59. */
  from: string;
  /** `HH:MM`, 00:00 to 24:00. */
  to: string;
}

export interface Schedule {
  /** IANA time zone, e.g. `Europe/Berlin`. */
  timezone: string;
  windows: WeeklyWindow[];
}

const DAY_MICROS = 86_400_000_000;
/** How far ahead a window is looked for: every non-empty weekly schedule has one within a week. */
const LOOK_AHEAD_MICROS = 8 * DAY_MICROS;

function hm(text: string): { hour: number; minute: number } {
  const [h, m] = text.split(':').map(Number);
  return { hour: h!, minute: m! };
}

/** The schedule's windows as [start, end) in microseconds, for every day touching [from, to]. */
export function windowsBetween(schedule: Schedule, from: number, to: number): [number, number][] {
  const out: [number, number][] = [];
  let day = DateTime.fromMillis(Math.floor(from / 1000), { zone: schedule.timezone })
    .startOf('day')
    .minus({ days: 1 });
  while (day.toMillis() * 1000 <= to) {
    const weekday = WEEKDAYS[day.weekday - 1]!;
    for (const w of schedule.windows) {
      if (!w.days.includes(weekday)) continue;
      // Over midnight as written (`to` at or before `from`), not as the day's offsets make it: on the
      // spring change 02:30 becomes 03:30, after a written 03:00.
      const overnight = w.to !== '24:00' && w.to <= w.from;
      const start = day.set(hm(w.from));
      const nextDay = day.plus({ days: 1 }).startOf('day');
      const end = w.to === '24:00' ? nextDay : overnight ? nextDay.set(hm(w.to)) : day.set(hm(w.to));
      // A window whose hours do not exist that day (inside the spring gap) is empty.
      if (end <= start) continue;
      out.push([start.toMillis() * 1000, end.toMillis() * 1000]);
    }
    day = day.plus({ days: 1 }).startOf('day'); // midnight again after a day that began at 01:00
  }
  return out.sort((a, b) => a[0] - b[0]);
}

/** Whether the rule is active at `t` (always, without a schedule). */
export function isActive(schedule: Schedule | null, t: number): boolean {
  if (!schedule) return true;
  return windowsBetween(schedule, t, t).some(([s, e]) => s <= t && t < e);
}

/**
 * The first moment in [from, until) at which the rule is active, or null. `until` may be
 * Infinity: the search then covers a week ahead, which every non-empty schedule fills.
 */
export function firstActive(schedule: Schedule | null, from: number, until: number): number | null {
  if (from >= until) return null;
  if (!schedule) return from;
  const to = Math.min(until, from + LOOK_AHEAD_MICROS);
  for (const [s, e] of windowsBetween(schedule, from, to)) {
    if (e <= from) continue;
    const t = Math.max(s, from);
    return t < until ? t : null;
  }
  return null;
}
