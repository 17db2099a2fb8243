import { afterEach, describe, expect, it } from '@jest/globals';
import type { MqttClient } from 'mqtt';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite } from '../../helpers/fixtures.ts';
import { closeClient, connectBridge, createBridge, nextMessage } from '../../helpers/mqtt.ts';

/**
 * `GET /v1/models` and `POST /v1/devices/{id}/identify` agree, model by model, with a bridge of the
 * site connected: a model listed without identify (the battery Shelly H&Ts, among others) answers
 * `unsupported` and no `cmd/identify` leaves the cloud; a model listed with it answers `sent` and
 * the bridge gets the command.
 */
describe.each(DATABASES)('identify support on %s', (db) => {
  let t: TestCloud;
  let bridge: MqttClient | undefined;
  afterEach(async () => {
    await closeClient(bridge);
    await t?.stop();
  });

  it('every model answers identify as GET /v1/models says it can', async () => {
    t = await startTestCloud({ db, mqtt: true });
    const user = await signUp(t, 'owner@example.com');
    const siteId = (await createSite(t, user.token)).id;
    const bundle = await createBridge(t, user.token, siteId);
    bridge = await connectBridge(t, bundle);
    const commands: string[] = [];
    bridge.on('message', (topic) => commands.push(topic));
    await bridge.subscribeAsync(`${bundle.topic_root}+/cmd/identify`, { qos: 1 });

    const models = (await t.http.get('/v1/models', { token: user.token })).json.data as {
      model: string;
      identify: boolean;
    }[];
    expect(models.find((m) => m.model === 'shelly-plus-ht')?.identify).toBe(false);
    expect(models.find((m) => m.model === 'shelly-ht-gen1')?.identify).toBe(false);

    for (const { model, identify } of models) {
      const localId = `dev-${model}`;
      const device = await createDevice(t, user.token, siteId, { local_id: localId, model });
      const command = identify
        ? nextMessage(bridge, (topic) => topic.endsWith(`/${localId}/cmd/identify`))
        : null;
      const answer = await t.http.post(`/v1/devices/${device.id}/identify`, undefined, { token: user.token });
      expect({ model, status: answer.status, body: answer.json }).toEqual({
        model,
        status: 202,
        body: { status: identify ? 'sent' : 'unsupported' },
      });
      if (command) expect((await command).topic).toBe(`${bundle.topic_root}${localId}/cmd/identify`);
    }
    // A round trip on the bridge after the last request (SUBACK): any command sent for a model
    // without identify would have arrived before it.
    await bridge.subscribeAsync(`${bundle.topic_root}+/cmd/cadence`, { qos: 1 });
    const withIdentify = models
      .filter((m) => m.identify)
      .map((m) => `${bundle.topic_root}dev-${m.model}/cmd/identify`);
    expect(commands.sort()).toEqual(withIdentify.sort());
  });
});
