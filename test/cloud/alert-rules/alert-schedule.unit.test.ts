import { describe, expect, it } from '@jest/globals';
import { isActive, windowsBetween, type Schedule } from '../../../cloud/src/alert-rules/alert-schedule.ts';

const utc = (iso: string) => Date.parse(iso) * 1000;

/** Alert rules' weekly windows across Europe/Berlin's spring change (2026-03-29, 02:00 → 03:00). */
describe('an alert rule schedule across the spring change', () => {
  it('leaves a window inside the missing hour empty that day, not nearly a whole day long', () => {
    const schedule: Schedule = {
      timezone: 'Europe/Berlin',
      windows: [{ days: ['sun'], from: '02:30', to: '03:00' }],
    };
    expect(isActive(schedule, utc('2026-03-22T01:45:00Z'))).toBe(true); // 02:45 CET the week before
    expect(isActive(schedule, utc('2026-03-29T01:45:00Z'))).toBe(false); // 03:45 CEST
    expect(isActive(schedule, utc('2026-03-29T10:00:00Z'))).toBe(false); // noon
    expect(isActive(schedule, utc('2026-03-30T00:30:00Z'))).toBe(false); // Monday 02:30
  });

  it('keeps a window over midnight as written, ending at its wall-clock time after the change', () => {
    const schedule: Schedule = {
      timezone: 'Europe/Berlin',
      windows: [{ days: ['sat'], from: '22:00', to: '06:00' }],
    };
    expect(isActive(schedule, utc('2026-03-28T21:30:00Z'))).toBe(true); // 22:30 CET
    expect(isActive(schedule, utc('2026-03-29T03:59:00Z'))).toBe(true); // 05:59 CEST
    expect(isActive(schedule, utc('2026-03-29T04:00:00Z'))).toBe(false); // 06:00 CEST
  });
});

/** Havana springs from 00:00 to 01:00 (2026-03-08): the change skips midnight itself. */
describe('an alert rule schedule where the spring change skips midnight', () => {
  it('ends a window "to 24:00" at midnight on the days after, not at 01:00', () => {
    const schedule: Schedule = {
      timezone: 'America/Havana',
      windows: [{ days: ['mon'], from: '20:00', to: '24:00' }],
    };
    expect(isActive(schedule, utc('2026-03-10T03:30:00Z'))).toBe(true); // Monday 23:30 CDT
    expect(isActive(schedule, utc('2026-03-10T04:30:00Z'))).toBe(false); // Tuesday 00:30 CDT
    // Walked from the day of the change, as the search for the next active moment does.
    expect(windowsBetween(schedule, utc('2026-03-08T17:00:00Z'), utc('2026-03-10T12:00:00Z'))).toEqual([
      [utc('2026-03-10T00:00:00Z'), utc('2026-03-10T04:00:00Z')], // Monday 20:00 to 24:00 CDT
    ]);
  });
});
