import { afterEach, describe, expect, it } from '@jest/globals';
import type mqttPacket from 'mqtt-packet';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createSite } from '../../helpers/fixtures.ts';
import { createBridge, rawConnect, type RawClient } from '../../helpers/mqtt.ts';

/**
 * Found by `npm run fuzz`: an UNSUBSCRIBE for a filter named like an Object.prototype member threw
 * out of aedes' packet handler (an uncaught exception: the whole cloud down). Now it is answered
 * "no subscription existed" and the connection goes on (aedes-compat.ts §8).
 */
describe.each(DATABASES)('MQTT UNSUBSCRIBE with prototype names on %s', (db) => {
  let t: TestCloud;
  let client: RawClient | undefined;
  afterEach(async () => {
    client?.socket.destroy();
    await t?.stop();
  });

  it('answers 0x11 for constructor, toString, __proto__ and hasOwnProperty, then still takes a reading', async () => {
    t = await startTestCloud({ db, mqtt: true });
    const user = await signUp(t, 'bridge@example.com');
    const site = await createSite(t, user.token);
    const bundle = await createBridge(t, user.token, site.id);
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    try {
      const raw = await rawConnect(t, bundle);
      client = raw;
      expect(raw.connack.reasonCode).toBe(0);
      const names = ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf'];
      raw.send({ cmd: 'unsubscribe', messageId: 7, unsubscriptions: names });
      const unsuback = (await raw.next('unsuback')) as mqttPacket.IUnsubackPacket & { granted?: number[] };
      expect(unsuback.granted ?? (unsuback as { reasonCode?: number[] }).reasonCode).toEqual(
        names.map(() => 0x11),
      );
      raw.send({
        cmd: 'publish',
        topic: `service/${user.accountId}/fridge-1`,
        qos: 1,
        messageId: 8,
        retain: false,
        dup: false,
        payload: Buffer.from(JSON.stringify({ measurements: [{ type: 'temperature', value: 4.5 }] })),
      });
      const puback = (await raw.next('puback')) as mqttPacket.IPubackPacket;
      expect(puback.reasonCode ?? 0).toBe(0);
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
    }
  });
});
