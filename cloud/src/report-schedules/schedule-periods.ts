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

/**
 * The first period boundary strictly after `instant`: the next local midnight that starts a calendar
 * month, or a Monday (ISO weeks), in `timezone`. Daylight-saving changes only move the boundary's UTC
 * offset: months and weeks are counted in local dates.
 */
export function periodEndAfter(instant: number, every: ScheduleEvery, timezone: string): number {
  const local = at(instant, timezone);
  return micros(local.startOf(every).plus(every === 'month' ? { months: 1 } : { weeks: 1 }));
}

/** The period that ends at `end` (a boundary): `[start of the month or week before it, end)`. */
export function periodEndingAt(
  end: number,
  every: ScheduleEvery,
  timezone: string,
): { from: number; to: number } {
  return { from: micros(at(end - 1, timezone).startOf(every)), to: end };
}
