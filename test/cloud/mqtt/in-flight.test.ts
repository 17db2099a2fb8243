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
 * and answered in order after their commit.
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
});
