import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type mqttPacket from 'mqtt-packet';
import type { IngestItem, IngestOutcome } from '../../../cloud/src/ingest/ingest.types.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createSite, measurementCount } from '../../helpers/fixtures.ts';
import { createBridge, rawConnect, type BridgeBundle, type RawClient } from '../../helpers/mqtt.ts';

/**
 * QoS 1 publishes in flight on the bridge: a connection's pipelined publishes are worked on together
 * and answered in order after their commit; a redelivery after a lost PUBACK is stored once.
 */
describe.each(DATABASES)('MQTT publishes in flight on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let bundle: BridgeBundle;
  const sockets: RawClient[] = [];
  /** Lets held ingest work go on, so that the cloud can stop even after a failed assertion. */
  let release = () => undefined as void;

  const connect = async (connect: Partial<mqttPacket.IConnectPacket>) => {
    const c = await rawConnect(t, bundle, connect);
    sockets.push(c);
    expect(c.connack.reasonCode).toBe(0);
    return c;
  };
  const measurement = (id: number, payload: unknown, dup = false): mqttPacket.IPublishPacket => ({
    cmd: 'publish',
    topic: `service/${user.accountId}/fridge-1`,
    payload: Buffer.from(typeof payload === 'string' ? payload : JSON.stringify(payload)),
    qos: 1,
    messageId: id,
    dup,
    retain: false,
  });
  const reading = (value: number) => ({ measurements: [{ type: 'temperature', value }] });

  beforeEach(async () => {
    t = await startTestCloud({ db, mqtt: true });
    user = await signUp(t, 'ops@example.com');
    bundle = await createBridge(t, user.token, (await createSite(t, user.token)).id);
  });

  afterEach(async () => {
    release();
    for (const c of sockets.splice(0)) c.socket.destroy();
    await t?.stop();
  });

  it("reads a connection's next publishes while earlier ones wait for their commit, and answers all in order after it", async () => {
    // The ingest core is held: nothing commits until `release`.
    const ingest = t.cloud.services.ingest;
    const submit = ingest.submit.bind(ingest);
    const submitted: IngestItem[] = [];
    const gate = new Promise<void>((resolve) => (release = resolve));
    ingest.submit = async (item: IngestItem): Promise<IngestOutcome> => {
      submitted.push(item);
      await gate;
      return submit(item);
    };
    const c = await connect({ clientId: 'pipelined' });

    // Two publishes in one write (one read on the server), then two more, each in its own write.
    c.send(measurement(1, reading(1)), measurement(2, reading(2)));
    await eventually(() => submitted.length === 2, 'the first two publishes at the ingest core');
    c.send(measurement(3, reading(3)));
    await eventually(() => submitted.length === 3, 'the third publish at the ingest core');
    c.send(measurement(4, 'not json'));
    await eventually(
      () => t.logs.some((l) => l.msg === 'MQTT publish rejected'),
      'the fourth publish to be rejected',
    );

    // Nothing is answered before the commit, not even the rejection decided without the database.
    expect(c.unread).toEqual([]);
    release();
    const pubacks: mqttPacket.IPubackPacket[] = [];
    for (let i = 0; i < 4; i++) pubacks.push((await c.next('puback')) as mqttPacket.IPubackPacket);
    expect(pubacks.map((p) => [p.messageId, p.reasonCode ?? 0])).toEqual([
      [1, 0],
      [2, 0],
      [3, 0],
      [4, 0x99],
    ]);
    expect(await measurementCount(t)).toBe(3);
  });

  it('stores a redelivered measurement without ts once when the connection dropped between commit and PUBACK', async () => {
    const session = { clientId: 'gateway-1', clean: false, properties: { sessionExpiryInterval: 300 } };
    const first = await connect(session);
    // Right after the commit (listeners run before any answer is written), the connection drops.
    let drops = 1;
    t.cloud.services.ingest.onAccepted(() => {
      if (drops-- > 0) first.socket.destroy();
    });
    const closed = new Promise((resolve) => first.socket.once('close', resolve));
    first.send(measurement(9, reading(4)));
    await closed;
    expect(first.unread).toEqual([]); // no PUBACK reached the client
    expect(await measurementCount(t)).toBe(1);

    // The client resumes its session and sends the unacknowledged PUBLISH again, with DUP.
    const again = await connect(session);
    again.send(measurement(9, reading(4), true));
    expect(await again.next('puback')).toMatchObject({ messageId: 9 });
    expect(await measurementCount(t)).toBe(1);

    // Packet id 9 without DUP is a new message now: a second reading.
    again.send(measurement(9, reading(4)));
    expect(await again.next('puback')).toMatchObject({ messageId: 9 });
    expect(await measurementCount(t)).toBe(2);

    // Clean Start ends the session: what it remembered is gone.
    const fresh = await connect({ ...session, clean: true });
    fresh.send(measurement(9, reading(4), true));
    expect(await fresh.next('puback')).toMatchObject({ messageId: 9 });
    expect(await measurementCount(t)).toBe(3);
  });

  it('forgets the receive times of a session that ended with its connection (Session Expiry 0)', async () => {
    const session = { clientId: 'gateway-2', clean: false, properties: { sessionExpiryInterval: 0 } };
    const first = await connect(session);
    first.send(measurement(5, reading(4)));
    expect(await first.next('puback')).toMatchObject({ messageId: 5 });
    first.socket.destroy();
    await eventually(
      async () =>
        (await t.http.get(`/v1/bridges/${bundle.id}`, { token: user.token })).json.connected === false,
      'the bridge to notice the closed connection',
    );
    const again = await connect(session);
    again.send(measurement(5, reading(4), true));
    expect(await again.next('puback')).toMatchObject({ messageId: 5 });
    expect(await measurementCount(t)).toBe(2);
  });
});
