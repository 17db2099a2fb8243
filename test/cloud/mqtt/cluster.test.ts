import { afterEach, describe, expect, it } from '@jest/globals';
import mqtt, { type IConnackPacket, type MqttClient } from 'mqtt';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createDevice, createSite } from '../../helpers/fixtures.ts';
import {
  closeClient,
  connectBridge,
  createBridge,
  nextMessage,
  type BridgeBundle,
} from '../../helpers/mqtt.ts';
import { spawnReplica, type Replica } from '../../helpers/replicas.ts';
import { REDIS_URL, redisPrefix, removeRedisKeys } from '../../helpers/redis.ts';

/**
 * The clustered MQTT bridge (REDIS_URL): replica A in this process, replica B a process of its own,
 * one PostgreSQL, one Redis under a key prefix of this test's own (removed afterwards).
 */
if (DATABASES.includes('postgres'))
  describe('the MQTT bridge clustered through Redis, two replicas on PostgreSQL', () => {
    let database: TestDatabase | undefined;
    let a: TestCloud | undefined;
    let b: Replica | undefined;
    const clients: MqttClient[] = [];
    let prefix = '';

    afterEach(async () => {
      for (const c of clients.splice(0)) await closeClient(c);
      await b?.stop();
      await a?.stop();
      await database?.dispose();
      await removeRedisKeys(prefix);
    }, 120_000);

    async function twoReplicas(): Promise<{ user: SignedIn; bundle: BridgeBundle; siteId: string }> {
      prefix = redisPrefix();
      const env = { REDIS_URL, REDIS_PREFIX: prefix };
      database = testDatabase('postgres');
      a = await startTestCloud({ replicaOf: database, mqtt: true, env });
      // Signed up before B starts: the sign-in mail is a job that either process may claim, and
      // only A's mails are seen here.
      const user = await signUp(a, 'cluster@example.com');
      b = await spawnReplica(database, env);
      const siteId = (await createSite(a, user.token)).id;
      return { user, bundle: await createBridge(a, user.token, siteId), siteId };
    }

    async function identify(user: SignedIn, deviceId: string): Promise<unknown> {
      return (await a!.http.post(`/v1/devices/${deviceId}/identify`, undefined, { token: user.token })).json;
    }

    it('delivers a cmd/identify asked through A to the bridge connected to B', async () => {
      const { user, bundle, siteId } = await twoReplicas();
      const onB = await connectBridge(b!.mqttUrl, bundle);
      clients.push(onB);
      await onB.subscribeAsync(`${bundle.topic_root}+/cmd/#`, { qos: 1 });
      const fridge = await createDevice(a!, user.token, siteId, {
        local_id: 'fridge-1',
        model: 'mqtt-generic',
      });
      // A learns that a bridge of the site is connected (to B) from the database.
      await eventually(async () => {
        const got = (await a!.http.get(`/v1/bridges/${bundle.id}`, { token: user.token })).json;
        return got.connected === true;
      }, 'the bridge on B to show connected through A');

      const got = nextMessage(onB, (topic) => topic.endsWith('/cmd/identify'));
      expect(await identify(user, fridge.id)).toEqual({ status: 'sent' });
      const message = await got;
      expect(message.topic).toBe(`${bundle.topic_root}fridge-1/cmd/identify`);
      expect(JSON.parse(message.payload.toString())).toEqual(
        expect.objectContaining({ duration_s: expect.any(Number) }),
      );
    }, 180_000);

    it('resumes on B the session a bridge started on A: its subscription holds, and a command reaches it', async () => {
      const { user, bundle, siteId } = await twoReplicas();
      const onA = await connectBridge(a!, bundle, { clientId: 'gateway', clean: false });
      await onA.subscribeAsync(`${bundle.topic_root}+/cmd/#`, { qos: 1 });
      await onA.endAsync();

      const onB = mqtt.connect(b!.mqttUrl, {
        protocolVersion: 5,
        reconnectPeriod: 0,
        connectTimeout: 10_000,
        clientId: 'gateway',
        clean: false,
        cert: bundle.cert_pem,
        key: bundle.key_pem,
        ca: bundle.ca_pem,
      });
      clients.push(onB);
      const connack = await new Promise<IConnackPacket>((resolve, reject) => {
        onB.once('connect', resolve);
        onB.once('error', reject);
      });
      expect(connack.sessionPresent).toBe(true);
      const fridge = await createDevice(a!, user.token, siteId, {
        local_id: 'fridge-2',
        model: 'mqtt-generic',
      });
      await eventually(async () => {
        const got = (await a!.http.get(`/v1/bridges/${bundle.id}`, { token: user.token })).json;
        return got.connected === true;
      }, 'the bridge on B to show connected through A');
      // No SUBSCRIBE on B: the subscription comes from the session kept in Redis.
      const got = nextMessage(onB, (topic) => topic.endsWith('/cmd/identify'));
      expect(await identify(user, fridge.id)).toEqual({ status: 'sent' });
      expect((await got).topic).toBe(`${bundle.topic_root}fridge-2/cmd/identify`);
    }, 180_000);
  });
