import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { MqttClient } from 'mqtt';
import {
  COMMANDS,
  commandTopic,
  infoTopic,
  lwtTopic,
  measurementTopic,
  topicRoot,
} from '../../../shared/mqtt.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createSite, measurementCount } from '../../helpers/fixtures.ts';
import {
  closeClient,
  connectBridge,
  createBridge,
  nextMessage,
  publish,
  subscribeCodes,
  type BridgeBundle,
} from '../../helpers/mqtt.ts';

/**
 * Tenant isolation of the MQTT topic tree, by construction: every kind of topic the bridge knows
 * (shared/mqtt.ts builds each one) and every command name, aimed by one account's bridge at another
 * account's device of the same local id. Publishes are refused with 0x87 and change nothing of the
 * other account; subscriptions that could match the other account's topics are refused; a command
 * to the other account's device reaches that account's bridge only.
 */
describe.each(DATABASES)('MQTT topic tree isolation on %s', (db) => {
  let t: TestCloud;
  let mine: SignedIn;
  let theirs: SignedIn;
  let myBundle: BridgeBundle;
  let theirBundle: BridgeBundle;
  let theirSite: string;
  const clients: MqttClient[] = [];
  const connect = async (bundle: BridgeBundle) => {
    const c = await connectBridge(t, bundle, {});
    clients.push(c);
    return c;
  };
  const reading = { measurements: [{ type: 'temperature', value: 4 }] };

  beforeEach(async () => {
    t = await startTestCloud({ db, mqtt: true });
    mine = await signUp(t, 'mine@example.com');
    theirs = await signUp(t, 'theirs@example.com');
    myBundle = await createBridge(t, mine.token, (await createSite(t, mine.token)).id);
    theirSite = (await createSite(t, theirs.token)).id;
    theirBundle = await createBridge(t, theirs.token, theirSite);
    // Their device fridge-1 exists, online, with one measurement; mine has the same local id.
    const c = await connect(theirBundle);
    expect((await publish(c, measurementTopic(theirs.accountId, 'fridge-1'), reading)).reasonCode).toBe(0);
    expect(
      (await publish(await connect(myBundle), measurementTopic(mine.accountId, 'fridge-1'), reading))
        .reasonCode,
    ).toBe(0);
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) await closeClient(c);
    await t?.stop();
  });

  async function theirDevices(): Promise<Record<string, unknown>[]> {
    return (await t.http.get(`/v1/devices?site_id=${theirSite}`, { token: theirs.token })).json.data;
  }

  it("refuses a publish on every kind of topic under the other account's root and changes nothing there", async () => {
    const before = await theirDevices();
    const c = await connect(myBundle);
    const topics = [
      measurementTopic(theirs.accountId, 'fridge-1'),
      measurementTopic(theirs.accountId, 'new-device'),
      lwtTopic(theirs.accountId, 'fridge-1'),
      infoTopic(theirs.accountId, 'fridge-1'),
      ...COMMANDS.map((name) => commandTopic(theirs.accountId, 'fridge-1', name)),
    ];
    for (const topic of topics) {
      const payload = topic.endsWith('/lwt')
        ? { online: false }
        : topic.endsWith('/info')
          ? { fw: 'x' }
          : reading;
      expect({ topic, code: (await publish(c, topic, payload)).reasonCode }).toEqual({ topic, code: 0x87 });
    }
    // The connection still works inside its own root; the other account's devices are as they were.
    expect((await publish(c, measurementTopic(mine.accountId, 'fridge-1'), reading)).reasonCode).toBe(0);
    expect(await theirDevices()).toEqual(before);
    // Theirs and my two: nothing of the refused publishes was stored.
    expect(await measurementCount(t)).toBe(3);
  });

  it("refuses every subscription that could match the other account's topics", async () => {
    const c = await connect(myBundle);
    const filters = [
      `${topicRoot(theirs.accountId)}#`,
      `${topicRoot(theirs.accountId)}+/cmd/#`,
      commandTopic(theirs.accountId, 'fridge-1', 'cadence'),
      'service/+/fridge-1/cmd/#',
      'service/+/#',
      'service/#',
      '+/+/+/cmd/#',
      '#',
      `$share/g/${topicRoot(theirs.accountId)}#`,
    ];
    // 0x87 not authorized; a shared subscription is refused before that, as not supported (0x9E).
    expect(await subscribeCodes(c, filters)).toEqual([...filters.slice(0, -1).map(() => 0x87), 0x9e]);
  });

  it("delivers a command to the other account's device to that account's bridge only", async () => {
    const me = await connect(myBundle);
    await me.subscribeAsync(`${topicRoot(mine.accountId)}+/cmd/#`, { qos: 1 });
    const them = await connect(theirBundle);
    await them.subscribeAsync(`${topicRoot(theirs.accountId)}+/cmd/#`, { qos: 1 });
    const seenByMe: string[] = [];
    me.on('message', (topic) => seenByMe.push(topic));

    const theirFridge = (await theirDevices()).find((d) => d.local_id === 'fridge-1')!;
    const got = nextMessage(them, () => true);
    expect(
      (
        await t.http.post(`/v1/devices/${String(theirFridge.id)}/identify`, undefined, {
          token: theirs.token,
        })
      ).json,
    ).toEqual({ status: 'sent' });
    expect((await got).topic).toBe(commandTopic(theirs.accountId, 'fridge-1', 'identify'));

    // A command to my own device afterwards arrives first: the other account's was never forwarded.
    const myFridge = (
      await t.http.get(`/v1/devices?site_id=${myBundle.site_id}`, { token: mine.token })
    ).json.data.find((d: Record<string, unknown>) => d.local_id === 'fridge-1');
    const mineGot = nextMessage(me, () => true);
    await t.http.post(`/v1/devices/${String(myFridge.id)}/identify`, undefined, { token: mine.token });
    await mineGot;
    expect(seenByMe).toEqual([commandTopic(mine.accountId, 'fridge-1', 'identify')]);
  });
});
