import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite, type CreatedDevice } from '../../helpers/fixtures.ts';
import { ingest, publish, PUBLIC_ENV, sensorsOf } from './public-helpers.ts';

/**
 * Nothing private leaks, and what stops being public disappears at once, on every replica: random
 * devices (random kinds, public or not) go through random sequences of publish, unpublish, rename
 * and delete, while two cloud processes on one database answer public requests (and so cache
 * them). After every step both processes answer exactly the pins of the devices that are public
 * now, 404 for every other sensor, and no answer holds an id, token, name or note of the owner's beyond
 * the pin ids and what the owner published.
 */
const KINDS = ['temperature', 'humidity', 'pressure', 'co2', 'battery', 'leak'] as const;
const PIN_KINDS = new Set(['temperature', 'humidity', 'pressure', 'co2']);
const VALUE: Record<(typeof KINDS)[number], number> = {
  temperature: 21,
  humidity: 50,
  pressure: 1000,
  co2: 600,
  battery: 80,
  leak: 1,
};

type Op = { kind: 'publish' | 'unpublish' | 'delete' | 'rename' | 'read'; device: number };

const world = fc.record({
  devices: fc.array(
    fc.record({
      kinds: fc.subarray([...KINDS], { minLength: 1 }),
      public: fc.boolean(),
    }),
    { minLength: 1, maxLength: 4 },
  ),
  ops: fc.array(
    fc.record({
      kind: fc.constantFrom('publish', 'unpublish', 'delete', 'rename', 'read'),
      device: fc.nat({ max: 3 }),
    }) as fc.Arbitrary<Op>,
    { maxLength: 8 },
  ),
});

interface ModelDevice {
  device: CreatedDevice;
  sensors: { id: string; channel_id: string; kind: string }[];
  public: boolean;
  deleted: boolean;
  /** What the owner published (may appear in answers). */
  nickname: string;
  /** The device's name and notes in the owner's API (never in answers). */
  privateName: string;
  privateNotes: string;
}

describe.each(DATABASES)('privacy of the public API on %s', (db) => {
  let one: TestCloud;
  let two: TestCloud;
  let owner: SignedIn;
  let siteId: string;
  /** Every device made in every run: earlier runs' devices stay and must stay right too. */
  const model: ModelDevice[] = [];
  let counter = 0;

  beforeAll(async () => {
    const env = { ...PUBLIC_ENV, RATE_LIMIT_MODE: 'warn' };
    one = await startTestCloud({ db, env });
    two = await startTestCloud({ db, env, sameDatabaseAs: one });
    owner = await signUp(one, 'private.person@example.com', [two]);
    siteId = (await createSite(one, owner.token, { name: 'Home of Private Person' })).id;
  });
  afterAll(async () => {
    await two?.stop();
    await one?.stop();
  });

  /** Strings of the owner's that no public answer may hold. */
  function secrets(): string[] {
    const out = [owner.accountId, owner.userId, owner.token, owner.email, owner.sessionId, siteId];
    out.push('Home of Private Person', 'Private rename');
    for (const m of model) {
      out.push(m.device.id, m.device.local_id, m.device.ingest_token, m.privateName, m.privateNotes);
      for (const s of m.sensors) out.push(s.channel_id);
    }
    return out;
  }

  /** Both processes' answers against the model; detail and readings for `recent`'s sensors. */
  async function check(t: TestCloud, recent: ModelDevice[]): Promise<void> {
    const expected = model
      .filter((m) => m.public && !m.deleted)
      .flatMap((m) => m.sensors.filter((s) => PIN_KINDS.has(s.kind)).map((s) => s.id))
      .sort();
    const answers = [
      await t.http.get('/api/public/sensors'),
      await t.http.get('/api/public/sensors?bbox=-90,-180,90,180'),
      await t.http.get('/api/public/stats'),
      ...(await Promise.all(
        ['coldest_now', 'hottest_now', 'highest_co2', 'active_24h', 'longest_running'].map((m) =>
          t.http.get(`/api/public/leaderboards?metric=${m}`),
        ),
      )),
    ];
    expect(answers[0]!.json.map((p: { id: string }) => p.id).sort()).toEqual(expected);
    expect(answers[1]!.json.map((p: { id: string }) => p.id).sort()).toEqual(expected);
    expect(answers[2]!.json.sensors).toBe(expected.length);
    for (const board of answers.slice(3))
      for (const row of board.json as { id: string }[]) expect(expected).toContain(row.id);
    const visible = new Set(expected);
    for (const m of recent) {
      for (const s of m.sensors) {
        const detail = await t.http.get(`/api/public/sensors/${s.id}`);
        const readings = await t.http.get(`/api/public/sensors/${s.id}/readings`);
        const status = visible.has(s.id) ? 200 : 404;
        expect({ id: s.id, detail: detail.status, readings: readings.status }).toEqual({
          id: s.id,
          detail: status,
          readings: status,
        });
        answers.push(detail, readings);
      }
    }
    const leaked = secrets().filter((secret) => answers.some((a) => a.text.includes(secret)));
    expect(leaked).toEqual([]);
  }

  it('shows exactly the public devices, at once on both replicas, and nothing private', async () => {
    await fc.assert(
      fc.asyncProperty(world, async ({ devices, ops }) => {
        const run: ModelDevice[] = [];
        for (const spec of devices) {
          const device = await createDevice(one, owner.token, siteId, {
            name: `Private name ${counter + 1}`,
            notes: `Private notes ${counter + 1}`,
          });
          await ingest(
            one,
            device,
            Date.now() * 1000 - 60_000_000,
            spec.kinds.map((k) => ({ type: k, value: VALUE[k] })),
          );
          const entry: ModelDevice = {
            device,
            sensors: await sensorsOf(one, owner.token, device.id),
            public: false,
            deleted: false,
            nickname: `nick ${++counter}`,
            privateName: `Private name ${counter}`,
            privateNotes: `Private notes ${counter}`,
          };
          if (spec.public) {
            await publish(one, owner.token, device.id, {
              nickname: entry.nickname,
              location_name: 'Somewhere',
              lat: 10 + counter / 100,
              lon: 20,
            });
            entry.public = true;
          }
          model.push(entry);
          run.push(entry);
        }
        await check(one, run);
        await check(two, run);
        for (const [i, op] of ops.entries()) {
          const m = run[op.device % run.length]!;
          // Each step's change goes through one process; both must show it at once.
          const via = i % 2 === 0 ? one : two;
          if (m.deleted) continue;
          if (op.kind === 'publish') {
            await publish(via, owner.token, m.device.id, {
              nickname: m.nickname,
              location_name: 'Somewhere',
              lat: 10,
              lon: 20,
            });
            m.public = true;
          } else if (op.kind === 'unpublish') {
            const answer = await via.http.patch(
              `/v1/devices/${m.device.id}`,
              { public: { enabled: false } },
              { token: owner.token },
            );
            expect(answer.status).toBe(200);
            m.public = false;
          } else if (op.kind === 'delete') {
            expect(
              (await via.http.call('DELETE', `/v1/devices/${m.device.id}`, undefined, { token: owner.token }))
                .status,
            ).toBe(204);
            m.deleted = true;
          } else if (op.kind === 'rename') {
            // A change of something else keeps the device's public state as it was.
            const answer = await via.http.patch(
              `/v1/devices/${m.device.id}`,
              { name: `Private rename ${counter}` },
              { token: owner.token },
            );
            expect(answer.json.public?.enabled ?? false).toBe(m.public);
          }
          await check(one, run);
          await check(two, run);
        }
      }),
      { numRuns: 10 },
    );
  }, 180_000);
});
