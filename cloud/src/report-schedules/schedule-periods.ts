import { DateTime } from 'luxon';

export const SCHEDULE_EVERY = ['month', 'week'] as const;
export type ScheduleEvery = (typeof SCHEDULE_EVERY)[number];

/**
 * How long after a period ends its report is made: measurements of the period's last minutes (a
 * gateway's buffer, the ingest journal's fold) are in by then, and the mail still goes out within a
 * quarter of an hour of local midnight.
 */
export const RUN_DELAY_MICROS = 5 * 60 * 1_000_000;

const at = (micros: number, timezone: string) =>
  DateTime.fromMillis(Math.floor(micros / 1000), { zone: timezone });
const micros = (dt: DateTime) => dt.toMillis() * 1000;
const step = (every: ScheduleEvery) => (every === 'month' ? { months: 1 } : { weeks: 1 });

/**
 * The local calendar date of `instant` in `timezone`, as midnight of that date in UTC: date
 * arithmetic on it (start of the month or ISO week, plus a month) has no daylight-saving changes.
 */
function localDate(instant: number, timezone: string): DateTime {
  const local = at(instant, timezone);
  return DateTime.utc(local.year, local.month, local.day);
}

/**
 * The first instant of the local calendar date `date` (a UTC midnight, as `localDate` gives) in
 * `timezone`. That is local midnight, except where midnight does not exist (a daylight-saving
 * change at 00:00 moves the clock to 01:00: the day begins at 01:00) or exists twice (the day
 * begins at the first one).
 */
function firstInstantOf(date: DateTime, timezone: string): number {
  const sameDay = (dt: DateTime) => dt.year === date.year && dt.month === date.month && dt.day === date.day;
  // Luxon moves a nonexistent local time forward, which is the day's first instant, and resolves a
  // local time that exists twice to the later offset.
  const guess = DateTime.fromObject(
    { year: date.year, month: date.month, day: date.day },
    { zone: timezone },
  );
  const before = DateTime.fromMillis(guess.toMillis() - 1, { zone: timezone });
  if (!sameDay(before)) return micros(guess);
  // Midnight exists twice: the first one is earlier by the change of the offset.
  return micros(guess.plus({ minutes: guess.offset - before.offset }));
}

/**
 * The first period boundary strictly after `instant`: the first instant of the next local date
 * that starts a calendar month, or a Monday (ISO weeks), in `timezone`. Months and weeks are
 * counted in local dates: daylight-saving changes only move a boundary's UTC offset.
 */
export function periodEndAfter(instant: number, every: ScheduleEvery, timezone: string): number {
  return firstInstantOf(localDate(instant, timezone).startOf(every).plus(step(every)), timezone);
}

/**
 * The period boundary in `timezone` nearest to `instant`. A boundary computed in another time zone
 * (the site's zone before it changed) is within a day of one in this zone, and periods are at
 * least a week apart, so this is the same boundary in the current zone.
 */
export function nearestPeriodBoundary(instant: number, every: ScheduleEvery, timezone: string): number {
  const start = localDate(instant, timezone).startOf(every);
  const before = firstInstantOf(start, timezone);
  const after = firstInstantOf(start.plus(step(every)), timezone);
  return instant - before <= after - instant ? before : after;
}

/**
 * The period that ends at the boundary `end`: from the first instant of the local date a month or
 * a week before `end`'s local date, to `end`. Derived from local dates, so a boundary whose
 * midnight does not exist (it begins at 01:00) still ends the period of the month before it.
 */
export function periodEndingAt(
  end: number,
  every: ScheduleEvery,
  timezone: string,
): { from: number; to: number } {
  const endDate = localDate(end, timezone).startOf(every);
  return { from: firstInstantOf(endDate.minus(step(every)), timezone), to: end };
}

/**
 * The name of a period, `2026-03` for a month or `2026-W10` for an ISO week, in `timezone`: the
 * month or week of its middle, so that a period whose ends are boundaries of another zone (the
 * first one after the site's time zone changed) is still named by the month or week it covers.
 */
export function periodLabel(
  period: { from: number; to: number },
  every: ScheduleEvery,
  timezone: string,
): string {
  const middle = at(Math.floor((period.from + period.to) / 2), timezone);
  return every === 'month' ? middle.toFormat('yyyy-MM') : middle.toFormat("kkkk-'W'WW");
}
