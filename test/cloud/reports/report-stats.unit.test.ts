import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { DateTime } from 'luxon';
import { downsample, localHourTicks, niceTicks } from '../../../cloud/src/reports/report-chart.ts';
import { ReportText } from '../../../cloud/src/reports/report-i18n.ts';
import type {
  ReportAlarm,
  ReportChannel,
  ReportInput,
  RuleSegment,
} from '../../../cloud/src/reports/report-input.ts';
import {
  channelStats,
  localDayBounds,
  presenceWindow,
  segmentsInForce,
  usualInterval,
} from '../../../cloud/src/reports/report-stats.ts';

const MINUTE = 60_000_000;
const HOUR = 60 * MINUTE;
const T0 = Date.UTC(2025, 0, 1) * 1000;
const rule = (from: number, okMin: number, okMax: number, enabled = true): RuleSegment => ({
  from,
  enabled,
  okMin,
  okMax,
  graceMin: 0,
});

/** A series of readings every `step` microseconds from `start`. */
function regular(start: number, step: number, values: number[]): { ts: Float64Array; values: Float64Array } {
  return { ts: Float64Array.from(values.map((_, i) => start + i * step)), values: Float64Array.from(values) };
}

/** The local time in a zone as microseconds since the epoch. */
function local(zone: string, iso: string): number {
  return DateTime.fromISO(iso, { zone }).toMillis() * 1000;
}

describe('channel statistics', () => {
  it('computes min, mean and max of known values and counts the readings', () => {
    const s = channelStats(regular(T0, MINUTE, [2.5, 4, 6, 8, 9.5, -1]), {
      timezone: 'UTC',
      from: T0,
      to: T0 + 6 * MINUTE,
      rules: [],
    });
    expect(s.readings).toBe(6);
    expect(s.min).toBe(-1);
    expect(s.max).toBe(9.5);
    expect(s.mean).toBeCloseTo(29 / 6, 12);
  });

  it('has no min, mean or max without readings, and zero coverage', () => {
    const s = channelStats(regular(T0, MINUTE, []), { timezone: 'UTC', from: T0, to: T0 + HOUR, rules: [] });
    expect([s.readings, s.min, s.mean, s.max, s.coveragePct]).toEqual([0, null, null, null, 0]);
    expect(s.timeInRangePct).toBeNull();
  });

  it('takes the usual interval as the median interval, so a few gaps do not change it', () => {
    const ts = Float64Array.from([0, 60, 120, 600, 660, 720, 780].map((s) => T0 + s * 1_000_000));
    expect(usualInterval(ts)).toBe(MINUTE);
    expect(usualInterval(Float64Array.from([T0]))).toBeNull();
  });

  it('measures coverage as readings received against readings expected from the usual interval', () => {
    // One day of 1-minute readings with a 60-minute hole: 1380 of 1440.
    const values: number[] = [];
    const ts: number[] = [];
    for (let i = 0; i < 1440; i++) {
      if (i >= 600 && i < 660) continue;
      ts.push(T0 + i * MINUTE);
      values.push(5);
    }
    const s = channelStats(
      { ts: Float64Array.from(ts), values: Float64Array.from(values) },
      { timezone: 'UTC', from: T0, to: T0 + 24 * HOUR, rules: [] },
    );
    expect(s.usualIntervalUs).toBe(MINUTE);
    expect(s.expectedReadings).toBe(1440);
    expect(s.coveragePct).toBeCloseTo((1380 / 1440) * 100, 9);
  });

  it('measures coverage over the part of the period the device belonged to the site', () => {
    const values = new Array<number>(720).fill(5);
    const s = channelStats(regular(T0, MINUTE, values), {
      timezone: 'UTC',
      from: T0,
      to: T0 + 24 * HOUR,
      windowFrom: T0,
      windowTo: T0 + 12 * HOUR,
      rules: [],
    });
    expect(s.coveragePct).toBe(100);
  });

  it('judges each reading by the rule segment in force at its timestamp', () => {
    // 10 readings of 4 °C; the range narrows from 0..5 to 0..3 at the sixth reading.
    const s = channelStats(regular(T0, MINUTE, new Array<number>(10).fill(4)), {
      timezone: 'UTC',
      from: T0,
      to: T0 + 10 * MINUTE,
      rules: [rule(T0 + 5 * MINUTE, 0, 3), rule(T0 - HOUR, 0, 5)],
    });
    expect(s.judgedReadings).toBe(10);
    expect(s.timeInRangePct).toBeCloseTo(50, 9);
    expect(s.excursions).toHaveLength(1);
    expect(s.excursions[0]).toMatchObject({
      from: T0 + 5 * MINUTE,
      to: T0 + 10 * MINUTE,
      readings: 5,
      peak: 4,
    });
    expect(s.minutesOutOfRange).toBe(5);
    expect(s.days[0]!.minutesOutOfRange).toBe(5);
  });

  it('leaves readings under a disabled rule unjudged ("no rule")', () => {
    const s = channelStats(regular(T0, MINUTE, [1, 20, 1, 20]), {
      timezone: 'UTC',
      from: T0,
      to: T0 + 4 * MINUTE,
      rules: [rule(T0 - HOUR, 2, 8, false)],
    });
    expect(s.judgedReadings).toBe(0);
    expect(s.timeInRangePct).toBeNull();
    expect(s.excursions).toEqual([]);
  });

  it('judges only the readings under the enabled part when a rule is switched off mid-period', () => {
    const s = channelStats(regular(T0, MINUTE, [9, 9, 5, 9, 9, 9]), {
      timezone: 'UTC',
      from: T0,
      to: T0 + 6 * MINUTE,
      rules: [rule(T0 - HOUR, 2, 8), rule(T0 + 3 * MINUTE, 2, 8, false)],
    });
    expect(s.judgedReadings).toBe(3);
    expect(s.timeInRangePct).toBeCloseTo(100 / 3, 9);
    expect(s.excursions.map((e) => e.readings)).toEqual([2]);
  });

  it('counts separate excursions for runs split by an in-range reading or by a gap, with the farthest peak', () => {
    const ts = [0, 1, 2, 3, 4, 20, 21, 22, 23].map((m) => T0 + m * MINUTE);
    const values = [9, 12, 5, 1, 0.5, 9.5, 10, 5, 5];
    const s = channelStats(
      { ts: Float64Array.from(ts), values: Float64Array.from(values) },
      { timezone: 'UTC', from: T0, to: T0 + 30 * MINUTE, rules: [rule(T0 - HOUR, 2, 8)] },
    );
    expect(s.excursions.map((e) => [e.readings, e.peak])).toEqual([
      [2, 12],
      [2, 0.5],
      [2, 10],
    ]);
    // The run before the gap ends one usual interval after its last reading, not at the next reading.
    expect(s.excursions[1]!.to).toBe(T0 + 5 * MINUTE);
  });

  it('counts alarms and the ones not acknowledged', () => {
    const alarm = { acknowledgedAt: null } as ReportAlarm;
    const acked = { acknowledgedAt: T0 } as ReportAlarm;
    const s = channelStats(regular(T0, MINUTE, [5]), {
      timezone: 'UTC',
      from: T0,
      to: T0 + HOUR,
      rules: [],
      alarms: [alarm, acked, alarm],
    });
    expect([s.alarms, s.alarmsNotAcknowledged]).toEqual([3, 2]);
  });
});

describe('local days', () => {
  const NY = 'America/New_York';

  it('puts each reading on its local day across the March daylight-saving change in New York', () => {
    const from = local(NY, '2025-03-08T00:00');
    const to = local(NY, '2025-03-11T00:00');
    // Hourly readings in UTC: 24 + 23 + 24 of them fall on the three local days.
    const n = (to - from) / HOUR;
    expect(n).toBe(71);
    const values = Array.from({ length: n }, (_, i) => i);
    const s = channelStats(regular(from, HOUR, values), { timezone: NY, from, to, rules: [] });
    expect(s.days.map((d) => [d.isoDate, d.hours, d.readings])).toEqual([
      ['2025-03-08', 24, 24],
      ['2025-03-09', 23, 23],
      ['2025-03-10', 24, 24],
    ]);
    // The last reading of 9 March (23:00 local, 03:00 UTC on the 10th) belongs to the 9th.
    expect(s.days[1]!.max).toBe(46);
    expect(s.days[2]!.min).toBe(47);
    expect(s.days[1]!.mean).toBeCloseTo((24 + 46) / 2, 9);
  });

  it('puts a late-evening reading on its local day, not its UTC day', () => {
    const from = local(NY, '2025-03-09T00:00');
    const to = local(NY, '2025-03-11T00:00');
    const lateEvening = local(NY, '2025-03-09T23:30');
    expect(new Date(lateEvening / 1000).getUTCDate()).toBe(10);
    const s = channelStats(
      { ts: Float64Array.from([lateEvening]), values: Float64Array.from([7]) },
      { timezone: NY, from, to, rules: [] },
    );
    expect(s.days.map((d) => d.readings)).toEqual([1, 0]);
  });

  it('has a 23-hour day in spring and a 25-hour day in autumn', () => {
    const spring = localDayBounds(local(NY, '2025-03-09T00:00'), local(NY, '2025-03-10T00:00'), NY);
    expect(spring).toHaveLength(2);
    expect((spring[1]! - spring[0]!) / HOUR).toBe(23);
    const autumn = localDayBounds(local(NY, '2025-11-02T00:00'), local(NY, '2025-11-03T00:00'), NY);
    expect((autumn[1]! - autumn[0]!) / HOUR).toBe(25);
    const berlin = localDayBounds(
      local('Europe/Berlin', '2025-03-30T00:00'),
      local('Europe/Berlin', '2025-03-31T00:00'),
      'Europe/Berlin',
    );
    expect((berlin[1]! - berlin[0]!) / HOUR).toBe(23);
  });

  it('keeps every later day at midnight where a daylight-saving change skips midnight itself', () => {
    // Havana springs from 00:00 to 01:00 on 8 March 2026: that day starts at 01:00, 23 hours long.
    const HAVANA = 'America/Havana';
    const bounds = localDayBounds(
      local(HAVANA, '2026-03-01T00:00'),
      local(HAVANA, '2026-04-01T00:00'),
      HAVANA,
    );
    const times = bounds.map((b) => DateTime.fromMillis(b / 1000, { zone: HAVANA }).toFormat('MM-dd HH:mm'));
    expect(times).toHaveLength(32);
    expect(times.filter((t) => !t.endsWith('00:00'))).toEqual(['03-08 01:00']);
    expect(times.at(-1)).toBe('04-01 00:00');
    expect((bounds[8]! - bounds[7]!) / HOUR).toBe(23);
  });

  it('counts minutes out of range per local day', () => {
    const from = local(NY, '2025-03-09T00:00');
    const to = local(NY, '2025-03-11T00:00');
    // 1-minute readings, 10 °C (out of 2..8) from 23:50 on the 9th to 00:20 on the 10th.
    const hotFrom = local(NY, '2025-03-09T23:50');
    const hotTo = local(NY, '2025-03-10T00:20');
    const values: number[] = [];
    for (let t = from; t < to; t += MINUTE) values.push(t >= hotFrom && t < hotTo ? 10 : 5);
    const s = channelStats(regular(from, MINUTE, values), {
      timezone: NY,
      from,
      to,
      rules: [rule(from, 2, 8)],
    });
    expect(s.days.map((d) => d.minutesOutOfRange)).toEqual([10, 20]);
    expect(s.excursions).toHaveLength(1);
    expect(s.days.map((d) => d.readings)).toEqual([23 * 60, 24 * 60]);
  });
});

describe('the rule segments and the presence window', () => {
  it('lists the segments in force within the period, each with its end', () => {
    const segs = segmentsInForce(
      [rule(T0 + 5 * HOUR, 0, 3), rule(T0 - HOUR, 0, 5), rule(T0 + 50 * HOUR, 1, 2)],
      T0,
      T0 + 10 * HOUR,
    );
    expect(segs.map((s) => [s.okMax, s.to])).toEqual([
      [5, T0 + 5 * HOUR],
      [3, T0 + 50 * HOUR],
    ]);
  });

  it('starts at a move into the site and ends at a deletion', () => {
    const channel = { deviceId: 'dev_a', deviceDeletedAt: T0 + 20 * HOUR } as ReportChannel;
    const input = {
      report: { from: T0, to: T0 + 24 * HOUR },
      // A site of the same name as the one moved from: sites are told apart by id.
      site: { id: 'site_k', name: 'Kitchen' },
      moves: [
        {
          deviceId: 'dev_a',
          fromSiteId: 'site_b',
          toSiteId: 'site_k',
          fromSiteName: 'Kitchen',
          toSiteName: 'Kitchen',
          effectiveAt: T0 + 2 * HOUR,
        },
      ],
    } as unknown as ReportInput;
    expect(presenceWindow(input, channel)).toEqual({ from: T0 + 2 * HOUR, to: T0 + 20 * HOUR });
  });
});

describe('the chart reduction', () => {
  it('keeps at most two points per column, the extremes, and breaks the line at gaps', () => {
    const n = 44_640;
    const ts = new Float64Array(n);
    const values = new Float64Array(n);
    let k = 0;
    for (let i = 0; i < n; i++) {
      if (i >= 20_000 && i < 20_100) continue; // a 100-minute hole
      ts[k] = T0 + i * MINUTE;
      values[k] = Math.sin(i / 50) * 3 + (i === 30_000 ? 40 : 0) + (i === 31_000 ? -40 : 0);
      k++;
    }
    const series = { ts: ts.subarray(0, k), values: values.subarray(0, k) };
    const trace = downsample(series, T0, T0 + n * MINUTE, 500, 3 * MINUTE);
    const breaks = [...trace.y].filter(Number.isNaN).length;
    expect(breaks).toBe(1);
    expect(trace.y.length - breaks).toBeLessThanOrEqual(2 * 500);
    const finite = [...trace.y].filter((v) => !Number.isNaN(v));
    expect(Math.max(...finite)).toBe(Math.max(...series.values));
    expect(Math.min(...finite)).toBe(Math.min(...series.values));
    // x never goes back.
    expect(trace.x.every((x, i) => i === 0 || x >= trace.x[i - 1]!)).toBe(true);
  });

  it('keeps every column minimum and maximum for any series', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: -1000, max: 1000, noNaN: true }), { minLength: 1, maxLength: 300 }),
        (vs) => {
          const series = regular(T0, MINUTE, vs);
          const trace = downsample(series, T0, T0 + vs.length * MINUTE, 17, 0);
          const ys = [...trace.y];
          expect(Math.max(...ys)).toBe(Math.max(...vs));
          expect(Math.min(...ys)).toBe(Math.min(...vs));
          expect(ys.length).toBeLessThanOrEqual(34);
        },
      ),
    );
  });

  it('puts hour ticks on local hours, also on the day the clocks go forward', () => {
    const NY = 'America/New_York';
    const ticks = localHourTicks(local(NY, '2025-03-09T00:00'), local(NY, '2025-03-10T00:00'), NY, 3);
    const text = new ReportText('en', NY);
    expect(ticks.map((t) => text.time(t))).toEqual([
      '00:00',
      '03:00',
      '06:00',
      '09:00',
      '12:00',
      '15:00',
      '18:00',
      '21:00',
      '00:00',
    ]);
    expect((ticks[1]! - ticks[0]!) / HOUR).toBe(2);
  });

  it('chooses round value ticks', () => {
    expect(niceTicks(1.7, 8.6)).toEqual([2, 4, 6, 8]);
    expect(niceTicks(-25.3, -15.1)).toEqual([-24, -22, -20, -18, -16]);
  });
});

describe('report texts', () => {
  it('prints numbers in the language format', () => {
    expect(new ReportText('en', 'UTC').number(1234.56, 1)).toBe('1,234.6');
    expect(new ReportText('de', 'UTC').number(1234.56, 1)).toBe('1.234,6');
    expect(new ReportText('fr', 'UTC').number(1234.56, 1)).toBe('1\u202f234,6');
    expect(new ReportText('en', 'UTC').number(-0.01, 1)).toBe('0.0');
  });

  it('prints local times with the UTC offset in force', () => {
    const text = new ReportText('en', 'America/New_York');
    expect(text.dateTimeWithOffset(local('America/New_York', '2025-03-08T12:00'))).toBe(
      '8 Mar 2025, 12:00 UTC−05:00',
    );
    expect(text.dateTimeWithOffset(local('America/New_York', '2025-03-10T12:00'))).toBe(
      '10 Mar 2025, 12:00 UTC−04:00',
    );
    expect(new ReportText('de', 'Europe/Berlin').date(local('Europe/Berlin', '2025-03-09T00:00'))).toBe(
      '09.03.2025',
    );
    expect(new ReportText('fr', 'Europe/Paris').date(local('Europe/Paris', '2025-03-09T00:00'))).toBe(
      '9 mars 2025',
    );
  });

  it('has every text in every language', () => {
    const en = new ReportText('en', 'UTC').texts;
    for (const language of ['de', 'fr'] as const) {
      const texts = new ReportText(language, 'UTC').texts;
      expect(Object.keys(texts).sort()).toEqual(Object.keys(en).sort());
      for (const value of Object.values(texts)) expect(value.length).toBeGreaterThan(0);
    }
    expect(new ReportText('de', 'UTC').t('page', { x: 2, y: 7 })).toBe('Seite 2 von 7');
  });

  it('prints durations in days, hours and minutes', () => {
    const text = new ReportText('en', 'UTC');
    expect(text.duration(65 * MINUTE)).toBe('1 h 05 min');
    expect(text.duration(26 * HOUR + 3 * MINUTE)).toBe('1 d 2 h 03 min');
    expect(text.duration(7 * MINUTE)).toBe('7 min');
  });
});
