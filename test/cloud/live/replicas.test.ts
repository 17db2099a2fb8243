import { afterEach, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';
import { createDevice, createSite } from '../../helpers/fixtures.ts';
import { spawnReplica, type Replica } from '../../helpers/replicas.ts';
import { SseClient } from '../../helpers/sse.ts';

/**
 * The dashboard's stream across replicas: the notification hub goes through PostgreSQL's
 * LISTEN/NOTIFY, so a tab connected to replica B sees what came in through replica A.
 */
if (DATABASES.includes('postgres'))
  describe('the dashboard stream across two replicas on PostgreSQL', () => {
    let database: TestDatabase | undefined;
    let a: TestCloud | undefined;
    let b: Replica | undefined;
    let stream: SseClient | undefined;

    afterEach(async () => {
      stream?.close();
      await b?.stop();
      await a?.stop();
      await database?.dispose();
    }, 120_000);

    it('shows on a stream open on B a reading that came in through A, and the device going online', async () => {
      database = testDatabase('postgres');
      a = await startTestCloud({ replicaOf: database });
      // Signed up before B starts: the sign-in mail is a job that either process may claim, and
      // only A's mails are seen here.
      const user = await signUp(a, 'live@example.com');
      b = await spawnReplica(database);
      const site = await createSite(a, user.token);
      const device = await createDevice(a, user.token, site.id);

      stream = await SseClient.open(`${b.url}/app/api/stream`, { cookie: `os_session=${user.cookie}` });
      expect(stream.status).toBe(200);
      await stream.waitFor('ready', () => true, 30_000);

      const answer = await a.http.post(
        '/v1/ingest',
        { device: device.local_id, measurements: [{ type: 'temperature', value: 4.25 }] },
        { token: device.ingest_token },
      );
      expect(answer.status).toBe(200);
      const channelId = answer.json.channels[0].channel_id as string;
      const sensor = await stream.waitFor(
        'sensor',
        (s) => s.channel_id === channelId && s.last_value === 4.25,
        30_000,
      );
      expect(sensor.data).toEqual(
        (await a.http.get(`/v1/sensors/${sensor.data.id as string}`, { token: user.token })).json,
      );
      const online = await stream.waitFor('device', (d) => d.id === device.id && d.online === true, 30_000);
      expect(online.data.id).toBe(device.id);
    }, 180_000);
  });
