import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite, type CreatedDevice } from '../../helpers/fixtures.ts';

const T0 = Date.UTC(2026, 10, 24, 12, 0, 0) * 1000;

/**
 * A device's row is written when a request changes what it shows: its online state, or the second
 * of `last_seen_at` (the API shows whole seconds). Requests of one device within a second share one
 * write, so ingest groups naming the same devices do not queue for their row locks on PostgreSQL.
 */
describe.each(DATABASES)('device last_seen_at on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let device: CreatedDevice;
  const clock = new ManualClock(T0);
  afterEach(async () => t?.stop());

  const ingest = async (at: number) => {
    clock.set(at);
    const answer = await t.http.post(
      '/v1/ingest',
      { device: 'fridge-1', measurements: [{ type: 'temperature', value: 3 }] },
      { token: device.ingest_token },
    );
    expect(answer.status).toBe(200);
  };
  const stored = () =>
    t.cloud.services.db
      .selectFrom('devices')
      .select(['last_seen_at', 'online'])
      .where('id', '=', device.id)
      .executeTakeFirstOrThrow();
  const shown = async () =>
    (await t.http.get(`/v1/devices/${device.id}`, { token: user.token })).json as Record<string, unknown>;

  it('moves to the second of the newest request, writing the row once per second', async () => {
    clock.set(T0);
    t = await startTestCloud({ db, clock });
    user = await signUp(t, 'owner@example.com');
    const siteId = (await createSite(t, user.token)).id;
    device = await createDevice(t, user.token, siteId, { local_id: 'fridge-1' });

    await ingest(T0 + 100_000);
    expect(await stored()).toEqual({ last_seen_at: T0 + 100_000, online: 1 });
    await ingest(T0 + 900_000); // the same second: nothing the API shows changes, nothing is written
    expect(await stored()).toEqual({ last_seen_at: T0 + 100_000, online: 1 });
    expect(await shown()).toMatchObject({ last_seen_at: '2026-11-24T12:00:00Z', online: true });
    await ingest(T0 + 1_200_000);
    expect(await stored()).toEqual({ last_seen_at: T0 + 1_200_000, online: 1 });
    expect(await shown()).toMatchObject({ last_seen_at: '2026-11-24T12:00:01Z' });

    // An online flip is written within the same second.
    clock.set(T0 + 1_300_000);
    const offline = await t.http.get(
      `/v1/ingest/shelly?token=${device.ingest_token}&device=fridge-1&lwt=offline`,
    );
    expect(offline.status).toBe(200);
    expect(await stored()).toEqual({ last_seen_at: T0 + 1_300_000, online: 0 });
  });
});
