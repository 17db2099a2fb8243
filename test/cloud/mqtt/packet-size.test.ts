import { afterEach, describe, expect, it } from '@jest/globals';
import type { IDisconnectPacket, MqttClient } from 'mqtt';
import { MAX_PACKET_BYTES } from '../../../shared/mqtt.ts';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createSite, measurementCount } from '../../helpers/fixtures.ts';
import { closeClient, connectBridge, createBridge, publish } from '../../helpers/mqtt.ts';

/**
 * An authenticated bridge cannot make the cloud buffer a packet of any size (the library default is
 * about 256 MB): the bridge announces its maximum packet size in CONNACK and disconnects with 0x95
 * "packet too large" above it, before the packet is read whole.
 */
describe.each(DATABASES)('MQTT packet size on %s', (db) => {
  let t: TestCloud;
  const clients: MqttClient[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) await closeClient(c);
    await t?.stop();
  });

  it('announces the maximum in CONNACK, takes a batch below it, and disconnects with 0x95 above it', async () => {
    t = await startTestCloud({ db, mqtt: true });
    const user = await signUp(t, 'ops@example.com');
    const siteId = (await createSite(t, user.token)).id;
    const bundle = await createBridge(t, user.token, siteId);
    const client = await connectBridge(t, bundle);
    clients.push(client);
    expect(client.serverProperties?.maximumPacketSize).toBe(MAX_PACKET_BYTES);
    const topic = `service/${user.accountId}/fridge-1`;
    const largest = {
      measurements: Array.from({ length: 32 }, (_, i) => ({
        type: 'temperature',
        value: 3,
        label: `l${i}`.padEnd(64, 'x'),
        unit: '°C',
      })),
    };
    expect((await publish(client, topic, largest)).reasonCode).toBe(0);
    expect(await measurementCount(t)).toBe(32);

    const disconnected = new Promise<IDisconnectPacket>((resolve) => client.once('disconnect', resolve));
    client.publish(topic, Buffer.alloc(MAX_PACKET_BYTES + 1, 0x20), { qos: 1 });
    expect((await disconnected).reasonCode).toBe(0x95);
    expect(await measurementCount(t)).toBe(32);
  });
});
