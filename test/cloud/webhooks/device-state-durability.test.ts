import { afterEach, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite, createWebhook } from '../../helpers/fixtures.ts';

/**
 * A device's online/offline flip and the job that turns it into webhooks are committed together:
 * a crash right after the answer loses neither (the job runs at the next start).
 */
describe.each(DATABASES)('device state webhooks on %s', (db) => {
  let t: TestCloud;
  let second: TestCloud | null = null;
  afterEach(async () => {
    await second?.stop();
    await t?.stop();
  });

  it('queues the device_state job in the ingest transaction, and another process runs it', async () => {
    t = await startTestCloud({ db });
    const user = await signUp(t, 'ops@example.com');
    const site = await createSite(t, user.token);
    const device = await createDevice(t, user.token, site.id, { model: 'shelly-ht-gen1' });
    const reading = `/v1/ingest/shelly?token=${device.ingest_token}&device=${device.local_id}&temp=4`;
    expect((await t.http.get(reading)).status).toBe(200); // never seen → online
    await t.cloud.services.jobs.drain();
    // No job runs in this process from now on: as if it died right after answering.
    await t.cloud.services.jobs.stop();
    const answer = await t.http.get(
      `/v1/ingest/shelly?token=${device.ingest_token}&device=${device.local_id}&lwt=offline`,
    );
    expect(answer.status).toBe(200);
    const pending = await t.cloud.services.db
      .selectFrom('jobs')
      .select(['kind', 'payload', 'done_at'])
      .where('kind', '=', 'device_state')
      .where('done_at', 'is', null)
      .execute();
    expect(pending).toHaveLength(1);
    expect(pending[0]!.done_at).toBeNull();
    expect(JSON.parse(pending[0]!.payload)).toEqual([
      expect.objectContaining({ deviceId: device.id, online: false }),
    ]);

    second = await startTestCloud({ sameDatabaseAs: t });
    await second.cloud.services.jobs.drain();
    const done = await second.cloud.services.db
      .selectFrom('jobs')
      .select(['done_at', 'failed_at'])
      .where('kind', '=', 'device_state')
      .where('payload', 'like', '%"online":false%')
      .executeTakeFirstOrThrow();
    expect(done.done_at).not.toBeNull();
    expect(done.failed_at).toBeNull();
  });

  it('marks the device_state job done with the deliveries it queues: a second run queues none', async () => {
    t = await startTestCloud({ db, env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    const user = await signUp(t, 'ops@example.com');
    await createWebhook(t, user.token, ['device.offline']);
    const site = await createSite(t, user.token);
    const device = await createDevice(t, user.token, site.id, { model: 'shelly-ht-gen1' });
    const { jobs, db: database, webhooks } = t.cloud.services;
    const reading = `/v1/ingest/shelly?token=${device.ingest_token}&device=${device.local_id}&temp=4`;
    expect((await t.http.get(reading)).status).toBe(200); // never seen → online
    await jobs.drain();
    await jobs.stop();
    const lwt = `/v1/ingest/shelly?token=${device.ingest_token}&device=${device.local_id}&lwt=offline`;
    expect((await t.http.get(lwt)).status).toBe(200);
    const job = await database
      .selectFrom('jobs')
      .selectAll()
      .where('kind', '=', 'device_state')
      .where('payload', 'like', '%"online":false%')
      .executeTakeFirstOrThrow();
    // The job's run, and its process dying before the queue marked it done.
    await webhooks.publishDeviceStates(JSON.parse(job.payload), job.id);
    // Claimed again (its claim lapsed) and run to the end.
    for (let i = 0; i < 5; i++) await jobs.drain();
    const deliveries = await database
      .selectFrom('webhook_deliveries')
      .select('id')
      .where('type', '=', 'device.offline')
      .execute();
    expect(deliveries).toHaveLength(1);
  });
});
