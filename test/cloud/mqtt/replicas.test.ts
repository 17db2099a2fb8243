import { afterEach, describe, expect, it } from '@jest/globals';
import type { MqttClient } from 'mqtt';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createSite } from '../../helpers/fixtures.ts';
import { closeClient, connectBridge, createBridge, tryConnect } from '../../helpers/mqtt.ts';
import { spawnReplica, type Replica } from '../../helpers/replicas.ts';

/**
 * Two replicas on one PostgreSQL: A in this process (it signs people up and issues bridges), B a
 * process of its own with its own data directory. What one replica does to a bridge, the other
 * knows at once through LISTEN/NOTIFY and the shared tables.
 */
if (DATABASES.includes('postgres'))
  describe('bridges across two replicas on PostgreSQL', () => {
    let database: TestDatabase | undefined;
    let a: TestCloud | undefined;
    let b: Replica | undefined;
    let client: MqttClient | undefined;

    afterEach(async () => {
      await closeClient(client);
      await b?.stop();
      await a?.stop();
      await database?.dispose();
    }, 120_000);

    it('shows a bridge connected to B as connected through A, and a revocation through A drops it on B at once and refuses it there', async () => {
      database = testDatabase('postgres');
      a = await startTestCloud({ replicaOf: database, mqtt: true });
      // Signed up before B starts: the sign-in mail is a job that either process may claim, and
      // only A's mails are seen here.
      const user = await signUp(a, 'replicas@example.com');
      b = await spawnReplica(database);
      const bundle = await createBridge(a, user.token, (await createSite(a, user.token)).id);

      client = await connectBridge(b.mqttUrl, bundle);
      const seen = await eventually(async () => {
        const got = (await a!.http.get(`/v1/bridges/${bundle.id}`, { token: user.token })).json;
        return got.connected === true && got.last_seen_at !== null ? got : null;
      }, 'the bridge on B to show connected through A');
      expect(seen).toEqual(expect.objectContaining({ connected: true, last_seen_at: expect.any(String) }));

      const dropped = new Promise<{ reasonCode?: number; at: number }>((resolve) =>
        client!.once('disconnect', (packet) => resolve({ reasonCode: packet.reasonCode, at: Date.now() })),
      );
      const asked = Date.now();
      expect((await a.http.delete(`/v1/bridges/${bundle.id}`, { token: user.token })).status).toBe(204);
      const { reasonCode, at } = await dropped;
      expect(reasonCode).toBe(0x87);
      // The periodic check runs every 15 s: the notification is what made it this quick.
      expect(at - asked).toBeLessThan(10_000);

      expect(await tryConnect(b.mqttUrl, bundle)).toEqual(expect.objectContaining({ outcome: 'refused' }));
      await eventually(
        async () =>
          (await a!.http.get('/v1/bridges', { token: user.token })).json.data.length === 0 &&
          !(await a!.cloud.services.bridges.connectedAmong([{ id: bundle.id } as never])).has(bundle.id),
        'the revoked bridge to be neither listed nor connected',
      );
    }, 180_000);
  });
