import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { AGG_FNS, AGG_WIDTHS, type Agg, type AggFn } from '../../../cloud/src/measurements/rollups.ts';
import { formatMicros } from '../../../shared/time.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite } from '../../helpers/fixtures.ts';
import { at, ingestCore, readAll, READ_ENV, type Reading } from './reads-helpers.ts';

const NOW = at('2026-03-10T12:00:00Z');
/** Readings fall in the three days before NOW, so every level (minute, hour, day) and edge is hit. */
const SPAN = 3 * 86_400_000_000;
const START = NOW - SPAN;

/** The answer computed directly from raw rows, the way a plain GROUP BY would. */
function direct(rows: Reading[], from: number, to: number, width: number, fn: AggFn): [string, number][] {
  const buckets = new Map<number, Reading[]>();
  for (const r of rows) {
    if (r.ts < from || r.ts >= to) continue;
    const b = Math.floor(r.ts / width) * width;
    buckets.set(b, [...(buckets.get(b) ?? []), r]);
  }
  return [...buckets.entries()]
    .sort(([a], [b]) => a - b)
    .map(([b, points]) => {
      const values = points.map((p) => p.value);
      const byTs = [...points].sort((x, y) => x.ts - y.ts);
      const sum = values.reduce((s, v) => s + v, 0);
      const value = {
        mean: sum / values.length,
        min: Math.min(...values),
        max: Math.max(...values),
        first: byTs[0]!.value,
        last: byTs[byTs.length - 1]!.value,
        count: values.length,
        sum,
      }[fn];
      return [formatMicros(b), value];
    });
}

const reading = fc.record({
  // Clustered offsets: many readings share minutes and hours, some sit exactly on boundaries.
  ts: fc.oneof(
    fc.integer({ min: 0, max: SPAN - 1 }),
    fc.integer({ min: 0, max: 72 }).map((h) => h * 3_600_000_000),
    fc.integer({ min: 0, max: 300 }).map((m) => 3_600_000_000 * 30 + m * 1_000_000),
  ),
  value: fc.integer({ min: -800, max: 2000 }).map((v) => v / 10),
});

const scenario = fc.record({
  // Arrival in bursts (each burst is one or more ingest groups); later bursts carry late data.
  bursts: fc.array(fc.array(reading, { minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 4 }),
  // Retries of earlier readings with another value: duplicates, never counted twice.
  retries: fc.array(fc.nat(), { maxLength: 15 }),
  agg: fc.constantFrom(...(Object.keys(AGG_WIDTHS) as Agg[])),
  fn: fc.constantFrom(...AGG_FNS),
  from: fc.integer({ min: -3_600_000_000, max: SPAN }),
  length: fc.integer({ min: 1, max: SPAN + 7_200_000_000 }),
  limit: fc.integer({ min: 1, max: 500 }),
});

describe.each(DATABASES)('rollups agree with raw rows on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let siteId: string;
  beforeAll(async () => {
    t = await startTestCloud({ db, clock: new ManualClock(NOW), env: READ_ENV });
    user = await signUp(t, 'property@example.com');
    siteId = (await createSite(t, user.token)).id;
  });
  afterAll(async () => t?.stop());

  it('answers every agg and fn over any range exactly as a direct computation over the stored raw rows', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const device = await createDevice(t, user.token, siteId);
        const sent: Reading[] = [];
        let channelId: string | null = null;
        for (const burst of s.bursts) {
          const readings = burst.map((r) => ({ ts: START + r.ts, value: r.value }));
          for (const i of s.retries)
            if (sent.length > 0) readings.push({ ...sent[i % sent.length]!, value: 1.5 });
          const result = await ingestCore(t, device, readings);
          channelId = result.channelId ?? channelId;
          sent.push(...readings);
        }
        // What the database holds: the first value sent for each ts (a retry is a no-op).
        const kept = new Map<number, Reading>();
        for (const r of sent) if (!kept.has(r.ts)) kept.set(r.ts, r);
        const seq = (
          await t.cloud.services.db
            .selectFrom('sensors')
            .select('seq')
            .where('channel_id', '=', channelId!)
            .executeTakeFirstOrThrow()
        ).seq;
        const raw = await t.cloud.services.db
          .selectFrom('measurements')
          .select(['ts', 'value'])
          .where('sensor_seq', '=', seq)
          .orderBy('ts')
          .execute();
        expect(raw).toEqual([...kept.values()].sort((a, b) => a.ts - b.ts));

        const from = START + s.from;
        const to = from + s.length;
        const path =
          `/v1/channels/${channelId}/measurements?agg=${s.agg}&fn=${s.fn}&limit=${s.limit}` +
          `&from=${encodeURIComponent(formatMicros(from))}&to=${encodeURIComponent(formatMicros(to))}`;
        const answer = await readAll(t, user.token, path);
        const expected = direct(raw, from, to, AGG_WIDTHS[s.agg], s.fn);
        expect(answer.points.map((p) => p.ts)).toEqual(expected.map(([ts]) => ts));
        answer.points.forEach((p, i) => {
          const want = expected[i]![1];
          if (s.fn === 'mean' || s.fn === 'sum') expect(p.value).toBeCloseTo(want, 6);
          else expect(p.value).toBe(want);
        });
      }),
      { numRuns: 30 },
    );
  });
});
