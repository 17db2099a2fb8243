import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { derive } from '../../../cloud/src/rules/derive.ts';
import { RuleTimeline } from '../../../cloud/src/rules/timeline.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, type CreatedDevice } from '../../helpers/fixtures.ts';
import { at, MINUTE, rulesWorld, type RulesWorld } from './world.ts';

/**
 * Measurement time, not arrival time: for random sequences of readings, feeding them in order (the
 * clock moving with them, ticks in between), shuffled one at a time, or all at once as a late batch
 * gives the same set of alarm events, and that set is the pure derivation over the sorted series.
 */
const FOOD_SERVICE = { okMin: 0, okMax: 5, graceMin: 30, enabled: true, noDataMin: 60 };

const readings = fc.array(
  fc.record({
    gapMin: fc.integer({ min: 1, max: 90 }),
    value: fc.constantFrom(2, 3.5, 5, 6, 9, -1, -4),
  }),
  { minLength: 2, maxLength: 14 },
);

function comparable(events: any[]) {
  return events
    .map((e) => ({
      kind: e.kind,
      state: e.state,
      started_at: e.started_at,
      alarm_at: e.alarm_at,
      ended_at: e.ended_at,
      peak_value: e.peak_value,
      ok_min: e.ok_min,
      ok_max: e.ok_max,
    }))
    .sort((a, b) => (a.started_at + a.kind < b.started_at + b.kind ? -1 : 1));
}

describe.each(DATABASES)('events do not depend on arrival order on %s', (db) => {
  let w: RulesWorld;
  beforeAll(async () => {
    w = await rulesWorld(db);
  });
  afterAll(async () => w?.t.stop());

  const eventsOf = async (channel: string) => comparable(await w.events(`?channel_id=${channel}&limit=500`));

  it('gives the same events in order, shuffled, and as a late batch', async () => {
    await fc.assert(
      fc.asyncProperty(
        readings,
        fc.integer({ min: 0, max: 150 }),
        fc.array(fc.nat(), { minLength: 14, maxLength: 14 }),
        async (list, tailMin, sortKeys) => {
          const base = w.clock.nowMicros() + 60 * MINUTE;
          let ts = base;
          const samples = list.map((r) => ({ ts: (ts += r.gapMin * MINUTE), value: r.value }));
          const end = ts + tailMin * MINUTE;
          const devices: CreatedDevice[] = [];
          for (let i = 0; i < 3; i++) devices.push(await createDevice(w.t, w.user.token, w.siteId));

          // 1. live, in order: the clock follows the readings and the tick runs in every gap
          let channelInOrder = '';
          let previous: number | null = null;
          for (const s of samples) {
            if (previous !== null) await w.tickAt(previous + (s.ts - previous) / 2);
            w.clock.set(s.ts);
            channelInOrder = await w.send(s.ts, s.value, 'temperature', devices[0]);
            await w.settle();
            previous = s.ts;
          }
          await w.tickAt(end);

          // 2. the same readings arriving one by one in a random order, after the fact
          const order = samples
            .map((s, i) => ({ s, key: sortKeys[i]! }))
            .sort((a, b) => a.key - b.key)
            .map(({ s }) => s);
          let channelShuffled = '';
          for (const s of order) {
            channelShuffled = await w.send(s.ts, s.value, 'temperature', devices[1]);
            await w.settle();
          }

          // 3. all of them at once, as a gateway drains its buffer after an outage
          const channels = await Promise.all(
            samples.map((s) => w.send(s.ts, s.value, 'temperature', devices[2])),
          );
          await w.settle();

          const expected = comparable(
            derive({ lastTs: null, run: null }, samples, RuleTimeline.constant(FOOD_SERVICE), end).events.map(
              (e) => ({
                kind: e.kind,
                state: e.endedAt === null ? 'open' : 'resolved',
                started_at: at(e.startedAt),
                alarm_at: at(e.alarmAt),
                ended_at: e.endedAt === null ? null : at(e.endedAt),
                peak_value: e.peak,
                ok_min: e.okMin,
                ok_max: e.okMax,
              }),
            ),
          );
          expect(await eventsOf(channelInOrder)).toEqual(expected);
          expect(await eventsOf(channelShuffled)).toEqual(expected);
          expect(await eventsOf(channels[0]!)).toEqual(expected);
        },
      ),
      { numRuns: db === 'sqlite' ? 30 : 12 },
    );
    // A fixed number of runs, about 13 s on a quiet machine: room for a busy one.
  }, 120_000);
});
