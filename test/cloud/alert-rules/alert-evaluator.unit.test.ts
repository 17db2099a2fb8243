import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  planStart,
  reconcileAlerts,
  runChannel,
  inScope,
  type StoredAlert,
  type Tracker,
} from '../../../cloud/src/alert-rules/alert-channel.ts';
import {
  deriveAlerts,
  type Condition,
  type DerivedAlert,
  type Sample,
  type Version,
} from '../../../cloud/src/alert-rules/alert-evaluator.ts';
import { isActive, type Schedule } from '../../../cloud/src/alert-rules/alert-schedule.ts';

/**
 * The alert-rule evaluator (cloud/src/alert-rules/alert-evaluator.ts, alert-channel.ts) over random
 * series: the same planning, folding and reconciliation the engine runs, against an in-memory
 * store instead of the database.
 */
const MINUTE = 60_000_000;
const T0 = Date.UTC(2026, 0, 5, 6, 0, 0) * 1000; // a Monday

const conditions: Condition[] = [
  { type: 'above', value: 8, hysteresis: 0.5, delay_min: 10, severity: 'warning' },
  { type: 'above', value: 12, hysteresis: 1, delay_min: 0, severity: 'critical' },
  { type: 'below', value: 0, hysteresis: 0.5, delay_min: 5, severity: 'warning' },
  { type: 'outside', min: 1, max: 10, hysteresis: 0.5, delay_min: 20, severity: 'warning' },
  { type: 'no_data', minutes: 45, severity: 'critical' },
  {
    type: 'rate_of_change',
    change: 3,
    within_min: 30,
    direction: 'any',
    hysteresis: 1,
    delay_min: 0,
    severity: 'warning',
  },
];
const OPENING_HOURS: Schedule = {
  timezone: 'Europe/Berlin',
  windows: [
    { days: ['mon', 'tue', 'wed', 'thu', 'fri'], from: '08:00', to: '18:00' },
    { days: ['sat'], from: '22:00', to: '02:00' },
  ],
};

const series = fc
  .array(
    fc.record({
      gapMin: fc.integer({ min: 1, max: 70 }),
      value: fc.constantFrom(-1, 0.2, 3, 7.6, 7.9, 8.2, 9, 11, 13),
    }),
    { minLength: 1, maxLength: 40 },
  )
  .map((list) => {
    let ts = T0;
    return list.map((r) => ({ ts: (ts += r.gapMin * MINUTE), value: r.value }));
  });

const key = (a: DerivedAlert) => `${a.versionFrom}:${a.cond}:${a.startedAt}`;
const sorted = (list: DerivedAlert[]) => [...list].sort((a, b) => (key(a) < key(b) ? -1 : 1));

/** The engine's loop over an in-memory store: deliver batches, evaluate after each. */
function deliver(
  versions: Version[] | ((batch: number) => Version[]),
  batches: Sample[][],
  now: number,
): DerivedAlert[] {
  const timelineAt = typeof versions === 'function' ? versions : () => versions;
  const stored = new Map<number, number>();
  let tracker: Tracker | null = null;
  let events: StoredAlert[] = [];
  let nextId = 0;
  for (const [i, batch] of batches.entries()) {
    const versions = timelineAt(i);
    for (const s of batch) stored.set(s.ts, s.value);
    const markFrom = batch.length ? Math.min(...batch.map((s) => s.ts)) : null;
    const plan = planStart(tracker, versions, markFrom);
    const samples = [...stored.entries()]
      .filter(([ts]) => ts > plan.readAfter && ts <= now)
      .sort((a, b) => a[0] - b[0])
      .map(([ts, value]) => ({ ts, value }));
    const run = runChannel(plan, versions, samples, now);
    const scope = events.filter((e) => inScope(plan.start, e));
    const r = reconcileAlerts(scope, run.alerts);
    const byId = new Map(events.map((e) => [e.id, e]));
    for (const d of r.insert) byId.set(`e${nextId}`, { ...d, id: `e${nextId++}`, withdrawn: false });
    for (const u of r.update) byId.set(u.id, { ...u.to, id: u.id, withdrawn: false });
    for (const id of r.withdraw) byId.set(id, { ...byId.get(id)!, withdrawn: true });
    events = [...byId.values()];
    tracker = run.tracker;
  }
  return events.filter((e) => !e.withdrawn).map(({ id: _id, withdrawn: _w, ...d }) => d);
}

function shuffle<T>(list: T[], keys: number[]): T[] {
  return list
    .map((x, i) => ({ x, k: keys[i % keys.length]! * 1000 + i }))
    .sort((a, b) => a.k - b.k)
    .map((p) => p.x);
}

function batches<T>(list: T[], cuts: number[]): T[][] {
  const out: T[][] = [];
  let i = 0;
  for (const c of cuts) {
    if (i >= list.length) break;
    const n = 1 + (c % 4);
    out.push(list.slice(i, i + n));
    i += n;
  }
  if (i < list.length) out.push(list.slice(i));
  return out;
}

describe('alert evaluator', () => {
  it('gives the same events for any arrival order and batching as for the sorted series', () => {
    fc.assert(
      fc.property(
        series,
        fc.array(fc.nat({ max: 50 }), { minLength: 1, maxLength: 40 }),
        fc.array(fc.nat(), { minLength: 1, maxLength: 40 }),
        fc.boolean(),
        fc.integer({ min: 0, max: 120 }),
        (samples, keys, cuts, scheduled, tailMin) => {
          const versions: Version[] = [
            { validFrom: T0, conditions, schedule: scheduled ? OPENING_HOURS : null },
          ];
          const now = samples[samples.length - 1]!.ts + tailMin * MINUTE;
          const expected = sorted(deriveAlerts(versions, samples, now));
          expect(sorted(deliver(versions, [samples], now))).toEqual(expected);
          expect(
            sorted(
              deliver(
                versions,
                samples.map((s) => [s]),
                now,
              ),
            ),
          ).toEqual(expected);
          expect(sorted(deliver(versions, batches(shuffle(samples, keys), cuts), now))).toEqual(expected);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('gives the same events across a rule change, judged by the version in force at each ts', () => {
    fc.assert(
      fc.property(
        series,
        fc.array(fc.nat({ max: 50 }), { minLength: 1 }),
        fc.integer({ min: 1, max: 600 }),
        (samples, keys, changeMin) => {
          const versions: Version[] = [
            { validFrom: T0, conditions, schedule: null },
            {
              validFrom: T0 + changeMin * MINUTE,
              conditions: conditions.slice(0, 2),
              schedule: OPENING_HOURS,
            },
          ];
          const now = samples[samples.length - 1]!.ts + 30 * MINUTE;
          const expected = sorted(deriveAlerts(versions, samples, now));
          expect(
            sorted(
              deliver(
                versions,
                shuffle(samples, keys).map((s) => [s]),
                now,
              ),
            ),
          ).toEqual(expected);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('gives the same events when the timeline gains a boundary in the past between deliveries (a device moved)', () => {
    fc.assert(
      fc.property(
        series,
        fc.array(fc.nat(), { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 1, max: 600 }),
        fc.option(fc.integer({ min: 1, max: 600 })),
        (samples, cuts, movedAfter, leaveMin, backMin) => {
          const before: Version[] = [{ validFrom: T0, conditions, schedule: null }];
          // the device leaves the rule's site, and perhaps comes back later
          const after: Version[] = [
            ...before,
            { validFrom: T0 + leaveMin * MINUTE, conditions: null, schedule: null },
            ...(backMin === null
              ? []
              : [{ validFrom: T0 + (leaveMin + backMin) * MINUTE, conditions, schedule: null }]),
          ];
          const now = samples[samples.length - 1]!.ts + 30 * MINUTE;
          const expected = sorted(deriveAlerts(after, samples, now));
          const delivered = batches(samples, cuts);
          const timeline = (i: number) => (i < Math.min(movedAfter, delivered.length) ? before : after);
          // an empty batch after the last one: the move's own evaluation, without new data
          expect(sorted(deliver(timeline, [...delivered, []], now))).toEqual(expected);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('opens one alarm for one crossing however the value hovers within the hysteresis', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 7.51, max: 9, noNaN: true }), { minLength: 1, maxLength: 50 }),
        (hover) => {
          const rule: Condition[] = [
            { type: 'above', value: 8, hysteresis: 0.5, delay_min: 0, severity: 'warning' },
          ];
          const versions: Version[] = [{ validFrom: T0, conditions: rule, schedule: null }];
          const values = [5, 8.5, ...hover, 7];
          const samples = values.map((value, i) => ({ ts: T0 + (i + 1) * MINUTE, value }));
          const alerts = deriveAlerts(versions, samples, T0 + (values.length + 5) * MINUTE);
          expect(alerts).toHaveLength(1);
          expect(alerts[0]!.endedAt).toBe(samples[samples.length - 1]!.ts);
        },
      ),
    );
  });

  it('opens at most one alarm for one crossing of any bound, with any delay and sampling', () => {
    // each case: the condition, a value that crosses its bound, the band within its hysteresis
    // (still on, never a start), and a value back past the hysteresis
    const cases = [
      {
        condition: { type: 'above', value: 8, hysteresis: 0.5 },
        cross: 8.5,
        band: [7.51, 8],
        back: 7,
      },
      {
        condition: { type: 'below', value: 0, hysteresis: 0.5 },
        cross: -0.5,
        band: [0, 0.49],
        back: 1,
      },
      {
        condition: { type: 'outside', min: 0, max: 8, hysteresis: 0.5 },
        cross: 8.5,
        band: [7.51, 8],
        back: 4,
      },
      {
        condition: { type: 'outside', min: 0, max: 8, hysteresis: 0.5 },
        cross: -0.5,
        band: [0, 0.49],
        back: 4,
      },
    ] as const;
    fc.assert(
      fc.property(
        fc.constantFrom(...cases),
        fc.integer({ min: 0, max: 30 }),
        fc.array(
          fc.record({
            gapMin: fc.integer({ min: 1, max: 10 }),
            at: fc.double({ min: 0, max: 1, noNaN: true }),
          }),
          {
            maxLength: 30,
          },
        ),
        fc.integer({ min: 1, max: 10 }),
        (c, delay, hover, lastGap) => {
          const rule = [{ ...c.condition, delay_min: delay, severity: 'warning' }] as Condition[];
          const versions: Version[] = [{ validFrom: T0, conditions: rule, schedule: null }];
          const [lo, hi] = c.band;
          let ts = T0 + MINUTE;
          const samples: Sample[] = [
            { ts, value: c.back },
            { ts: (ts += MINUTE), value: c.cross },
          ];
          const crossedAt = ts;
          for (const h of hover)
            samples.push({ ts: (ts += h.gapMin * MINUTE), value: lo + (hi - lo) * h.at });
          samples.push({ ts: (ts += lastGap * MINUTE), value: c.back });
          const alerts = deriveAlerts(versions, samples, ts + 60 * MINUTE);
          expect(alerts).toHaveLength(crossedAt + delay * MINUTE < ts ? 1 : 0);
          for (const a of alerts) expect([a.startedAt, a.endedAt]).toEqual([crossedAt, ts]);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('never opens an alarm outside the schedule windows', () => {
    const window = fc.record({
      days: fc.subarray(['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const, { minLength: 1 }),
      from: fc
        .integer({ min: 0, max: 23 * 4 })
        .map((q) => `${String(Math.floor(q / 4)).padStart(2, '0')}:${String((q % 4) * 15).padStart(2, '0')}`),
      to: fc
        .integer({ min: 0, max: 24 * 4 })
        .map((q) => `${String(Math.floor(q / 4)).padStart(2, '0')}:${String((q % 4) * 15).padStart(2, '0')}`),
    });
    fc.assert(
      fc.property(
        series,
        fc.array(window, { minLength: 1, maxLength: 3 }).filter((ws) => ws.every((w) => w.from !== w.to)),
        fc.constantFrom('Europe/Berlin', 'America/New_York', 'Asia/Kolkata', 'UTC'),
        (samples, windows, timezone) => {
          const schedule: Schedule = { timezone, windows: windows.map((w) => ({ ...w, days: [...w.days] })) };
          const versions: Version[] = [{ validFrom: T0, conditions, schedule }];
          const now = samples[samples.length - 1]!.ts + 60 * MINUTE;
          for (const a of deriveAlerts(versions, samples, now)) {
            expect(isActive(schedule, a.alarmAt)).toBe(true);
            expect(a.alarmAt).toBeLessThanOrEqual(now);
            if (a.endedAt !== null) expect(a.alarmAt).toBeLessThan(a.endedAt);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('raises a rate-of-change alarm for a rise of more than the change within the window', () => {
    const rule: Condition[] = [
      {
        type: 'rate_of_change',
        change: 3,
        within_min: 30,
        direction: 'rise',
        hysteresis: 0,
        delay_min: 0,
        severity: 'critical',
      },
    ];
    const versions: Version[] = [{ validFrom: T0, conditions: rule, schedule: null }];
    const samples = [
      { ts: T0 + 10 * MINUTE, value: 4 },
      { ts: T0 + 20 * MINUTE, value: 5 },
      { ts: T0 + 30 * MINUTE, value: 7.5 }, // +3.5 within 20 min
      { ts: T0 + 80 * MINUTE, value: 7.6 }, // nothing within 30 min before: ends
    ];
    expect(deriveAlerts(versions, samples, T0 + 90 * MINUTE)).toEqual([
      expect.objectContaining({
        kind: 'rate_of_change',
        severity: 'critical',
        startedAt: T0 + 30 * MINUTE,
        alarmAt: T0 + 30 * MINUTE,
        endedAt: T0 + 80 * MINUTE,
        peak: 3.5,
      }),
    ]);
  });

  it('opens a delayed alarm when the schedule window begins if the excursion is still on', () => {
    const rule: Condition[] = [{ type: 'above', value: 8, hysteresis: 0, delay_min: 0, severity: 'warning' }];
    const versions: Version[] = [{ validFrom: T0, conditions: rule, schedule: OPENING_HOURS }];
    // 06:00 UTC on Monday is 07:00 in Berlin; the window opens at 08:00 Berlin = 07:00 UTC
    const samples = [{ ts: T0 + 10 * MINUTE, value: 9 }];
    expect(deriveAlerts(versions, samples, T0 + 59 * MINUTE)).toEqual([]);
    expect(deriveAlerts(versions, samples, T0 + 60 * MINUTE)).toEqual([
      expect.objectContaining({ startedAt: T0 + 10 * MINUTE, alarmAt: T0 + 60 * MINUTE, endedAt: null }),
    ]);
  });
});
