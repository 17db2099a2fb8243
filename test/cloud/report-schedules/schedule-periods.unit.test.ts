import { describe, expect, it } from '@jest/globals';
import {
  nearestPeriodBoundary,
  periodEndAfter,
  periodEndingAt,
  periodLabel,
} from '../../../cloud/src/report-schedules/schedule-periods.ts';

const utc = (iso: string) => Date.parse(iso) * 1000;
const iso = (micros: number) => new Date(micros / 1000).toISOString();

describe('schedule periods', () => {
  it('ends a month at the local midnight of the next month’s first day', () => {
    // Berlin is UTC+1 in March until the 29th, UTC+2 from then on.
    const end = periodEndAfter(utc('2026-03-10T12:00:00Z'), 'month', 'Europe/Berlin');
    expect(iso(end)).toBe('2026-03-31T22:00:00.000Z');
    expect(periodEndingAt(end, 'month', 'Europe/Berlin')).toEqual({
      from: utc('2026-02-28T23:00:00Z'),
      to: end,
    });
    // The next boundary after a boundary is a month later.
    expect(iso(periodEndAfter(end, 'month', 'Europe/Berlin'))).toBe('2026-04-30T22:00:00.000Z');
  });

  it('counts weeks from Monday, local time, across a daylight-saving change', () => {
    // Sunday 8 March 2026: New York moves from UTC-5 to UTC-4.
    const end = periodEndAfter(utc('2026-03-04T15:00:00Z'), 'week', 'America/New_York');
    expect(iso(end)).toBe('2026-03-09T04:00:00.000Z'); // Monday 9 March, 00:00 EDT
    const week = periodEndingAt(end, 'week', 'America/New_York');
    expect(iso(week.from)).toBe('2026-03-02T05:00:00.000Z'); // Monday 2 March, 00:00 EST
    expect(week.to - week.from).toBe((7 * 24 - 1) * 3600 * 1e6);
  });

  it('is the next boundary even one microsecond before it, and the one after at it', () => {
    const boundary = utc('2026-06-01T00:00:00Z');
    expect(periodEndAfter(boundary - 1, 'month', 'UTC')).toBe(boundary);
    expect(iso(periodEndAfter(boundary, 'month', 'UTC'))).toBe('2026-07-01T00:00:00.000Z');
    expect(iso(periodEndAfter(boundary, 'week', 'UTC'))).toBe('2026-06-08T00:00:00.000Z'); // 1 June 2026 is a Monday
  });

  it('begins a first day whose midnight does not exist at 01:00, and ends the month before it there', () => {
    // America/Asuncion, 1 October 2023: 00:00 -04:00 becomes 01:00 -03:00.
    const october = periodEndAfter(utc('2023-09-10T12:00:00Z'), 'month', 'America/Asuncion');
    expect(iso(october)).toBe('2023-10-01T04:00:00.000Z');
    const november = periodEndAfter(october, 'month', 'America/Asuncion');
    expect(iso(november)).toBe('2023-11-01T03:00:00.000Z');
    expect(periodEndingAt(november, 'month', 'America/Asuncion')).toEqual({ from: october, to: november });
    expect(periodLabel({ from: october, to: november }, 'month', 'America/Asuncion')).toBe('2023-10');
  });

  it('finds the boundary of another time zone nearest to a stored one', () => {
    // 1 March 00:00 UTC is 1 March 00:00 in Berlin an hour earlier, not 1 April.
    expect(iso(nearestPeriodBoundary(utc('2026-03-01T00:00:00Z'), 'month', 'Europe/Berlin'))).toBe(
      '2026-02-28T23:00:00.000Z',
    );
    expect(iso(nearestPeriodBoundary(utc('2026-02-28T23:00:00Z'), 'month', 'UTC'))).toBe(
      '2026-03-01T00:00:00.000Z',
    );
    expect(iso(nearestPeriodBoundary(utc('2026-02-15T11:00:00Z'), 'week', 'America/Los_Angeles'))).toBe(
      '2026-02-16T08:00:00.000Z',
    );
    const boundary = utc('2026-03-31T22:00:00Z');
    expect(nearestPeriodBoundary(boundary, 'month', 'Europe/Berlin')).toBe(boundary);
  });
});
