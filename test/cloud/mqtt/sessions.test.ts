import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { Aedes } from 'aedes';
import type { MqttClient } from 'mqtt';
import type mqttPacket from 'mqtt-packet';
import { MAX_SESSION_SECONDS } from '../../../cloud/src/mqtt/mqtt-bridge.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createDevice, createSite, measurementCount } from '../../helpers/fixtures.ts';
import {
  closeClient,
  connectBridge,
  createBridge,
  rawConnect,
  subscribeCodes,
  type BridgeBundle,
  type RawClient,
} from '../../helpers/mqtt.ts';

/**
 * What a bridge's session keeps on the cloud broker: QoS 2 packet ids until PUBREL, subscriptions,
 * its lifetime; and the topics the cloud sends downlinks on.
 */
describe.each(DATABASES)('MQTT sessions on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let siteId: string;
  let bundle: BridgeBundle;
  const clients: MqttClient[] = [];
  const raws: RawClient[] = [];

  const root = () => `service/${user.accountId}`;
  const persistence = () =>
    (t.cloud.services.mqtt as unknown as { broker: Aedes & { persistence: Persistence } }).broker.persistence;
  /** The session's client id on the broker (prefixed with the certificate fingerprint). */
  const scoped = (clientId: string) => `${bundle.cert_fingerprint.slice(0, 16)}/${clientId}`;
  const reading = (ts: string, value: number) =>
    Buffer.from(JSON.stringify({ ts, measurements: [{ type: 'temperature', value }] }));
  const raw = async (connect: Partial<mqttPacket.IConnectPacket>) => {
    const c = await rawConnect(t, bundle, connect);
    raws.push(c);
    return c;
  };

  beforeEach(async () => {
    t = await startTestCloud({ db, mqtt: true });
    user = await signUp(t, 'ops@example.com');
    siteId = (await createSite(t, user.token, { vertical: 'food_service' })).id;
    bundle = await createBridge(t, user.token, siteId);
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) await closeClient(c);
    for (const r of raws.splice(0)) r.socket.destroy();
    await t?.stop();
  });

  describe('QoS 2', () => {
    const publish = (messageId: number, payload: Buffer, dup: boolean): mqttPacket.IPublishPacket => ({
      cmd: 'publish',
      topic: `${root()}/fridge-1`,
      payload,
      qos: 2,
      messageId,
      dup,
      retain: false,
    });

    it('stores a new message whose packet id a connection dropped before PUBREL left behind, and forgets that id at Clean Start', async () => {
      const first = await raw({ clientId: 'gw', clean: true });
      first.send(publish(1, reading('2026-01-05T10:00:00Z', 3), false));
      expect((await first.next('pubrec')) as mqttPacket.IPubrecPacket).toMatchObject({ messageId: 1 });
      first.socket.destroy(); // before PUBREL
      await eventually(
        () =>
          persistence()
            .incomingGetPacket({ id: scoped('gw') }, { messageId: 1 })
            .then(() => true),
        'the id in the incoming store',
      );

      // A client that starts over (Clean Start) numbers its messages from 1 again.
      const second = await raw({ clientId: 'gw', clean: true });
      expect(second.connack.sessionPresent).toBe(false);
      await eventually(
        () =>
          persistence()
            .incomingGetPacket({ id: scoped('gw') }, { messageId: 1 })
            .then(
              () => false,
              () => true,
            ),
        'Clean Start to clear the id from the incoming store',
      );
      // Without DUP: a new message even where an entry is still stored (a session on another replica).
      second.send(publish(1, reading('2026-01-05T11:00:00Z', 7), false));
      const pubrec = (await second.next('pubrec')) as mqttPacket.IPubrecPacket;
      expect(pubrec.reasonCode ?? 0).toBe(0);
      second.send({ cmd: 'pubrel', messageId: 1 });
      await second.next('pubcomp');
      expect(await measurementCount(t)).toBe(2);
    });

    it('takes a new message with a stored id but another payload, even with DUP, and still processes a true retransmission once', async () => {
      const c = await raw({ clientId: 'gw', clean: true });
      // A stale entry (say, written by a replica before the session moved) under id 5.
      await persistence().incomingStorePacket(
        { id: scoped('gw') },
        publish(5, reading('2026-01-05T09:00:00Z', 1), false),
      );
      c.send(publish(5, reading('2026-01-05T10:00:00Z', 2), true));
      expect(((await c.next('pubrec')) as mqttPacket.IPubrecPacket).reasonCode ?? 0).toBe(0);
      expect(await measurementCount(t)).toBe(1);

      // The PUBREC was lost: the same message comes again with DUP before PUBREL. Acknowledged again,
      // and stored once.
      const noTs = Buffer.from(JSON.stringify({ measurements: [{ type: 'temperature', value: 3 }] }));
      c.send(publish(6, noTs, false));
      await c.next('pubrec');
      c.send(publish(6, noTs, true));
      expect(((await c.next('pubrec')) as mqttPacket.IPubrecPacket).reasonCode ?? 0).toBe(0);
      c.send({ cmd: 'pubrel', messageId: 5 }, { cmd: 'pubrel', messageId: 6 });
      await c.next('pubcomp');
      await c.next('pubcomp');
      expect(await measurementCount(t)).toBe(2);
    });

    it('forgets the ids of a session that ends with its connection', async () => {
      const c = await raw({ clientId: 'gw', clean: true, properties: { sessionExpiryInterval: 0 } });
      c.send(publish(9, reading('2026-01-05T10:00:00Z', 3), false));
      await c.next('pubrec');
      c.socket.destroy();
      await eventually(
        () =>
          persistence()
            .incomingGetPacket({ id: scoped('gw') }, { messageId: 9 })
            .then(
              () => false,
              () => true,
            ),
        'the session end to clear the id from the incoming store',
      );
    });
  });

  describe('subscriptions', () => {
    it('keeps only the filters it granted in a persistent session, and prunes refused ones a resumed session holds', async () => {
      const c = await connectBridge(t, bundle, { clientId: 'gw', clean: false });
      clients.push(c);
      expect(await subscribeCodes(c, [`${root()}/+/cmd/#`, '#', 'service/acc_other/#'])).toEqual([
        1, 0x87, 0x87,
      ]);
      const stored = async () =>
        (await persistence().subscriptionsByClient({ id: scoped('gw') })).map((s) => s.topic).sort();
      expect(await stored()).toEqual([`${root()}/+/cmd/#`]);
      await c.endAsync();

      // A session stored by a server that kept refused filters is pruned on resume (written past the
      // bridge's filter, into the memory persistence underneath).
      await persistence().asyncPersistence.addSubscriptions({ id: scoped('gw') }, [{ topic: '#', qos: 1 }]);
      expect(await stored()).toEqual(['#', `${root()}/+/cmd/#`]);
      const again = await connectBridge(t, bundle, { clientId: 'gw', clean: false });
      clients.push(again);
      await eventually(
        async () => (await stored()).join() === `${root()}/+/cmd/#`,
        'the refused filter to be removed from the resumed session',
      );
    });
  });

  it(`grants a Session Expiry of ${MAX_SESSION_SECONDS} s at most, and says so in the CONNACK`, async () => {
    const forever = await raw({
      clientId: 'gw',
      clean: false,
      properties: { sessionExpiryInterval: 0xffffffff },
    });
    expect(forever.connack.properties?.sessionExpiryInterval).toBe(MAX_SESSION_SECONDS);
    const short = await raw({ clientId: 'gw2', clean: false, properties: { sessionExpiryInterval: 600 } });
    expect(short.connack.properties?.sessionExpiryInterval).toBeUndefined();
  });

  it('answers identify unreachable for a local_id that is no single topic level, and publishes nothing for it', async () => {
    const c = await connectBridge(t, bundle, { clientId: 'gw' });
    clients.push(c);
    const received: string[] = [];
    c.on('message', (topic) => received.push(topic));
    expect(await subscribeCodes(c, [`${root()}/#`])).toEqual([1]);
    const identify = async (localId: string) => {
      const device = await createDevice(t, user.token, siteId, { local_id: localId, model: 'mqtt-generic' });
      return (await t.http.post(`/v1/devices/${device.id}/identify`, undefined, { token: user.token })).json;
    };
    for (const localId of ['a/b', 'a+b', '#', 'x/+/cmd/identify']) {
      expect(await identify(localId)).toEqual({ status: 'unreachable' });
    }
    // A device that can be sent to, last: anything published for the others would have come first.
    expect(await identify('plain-1')).toEqual({ status: 'sent' });
    await eventually(() => received.length > 0, 'the identify of plain-1');
    expect(received).toEqual([`${root()}/plain-1/cmd/identify`]);
  });
});

/** The part of aedes' persistence these tests read and write. */
interface Persistence {
  incomingGetPacket(client: { id: string }, packet: { messageId: number }): Promise<unknown>;
  incomingStorePacket(client: { id: string }, packet: mqttPacket.IPublishPacket): Promise<void>;
  subscriptionsByClient(client: { id: string }): Promise<{ topic: string; qos: number }[]>;
  /** What aedes' memory persistence wraps in callbacks. */
  asyncPersistence: {
    addSubscriptions(client: { id: string }, subs: { topic: string; qos: number }[]): Promise<void>;
  };
}
