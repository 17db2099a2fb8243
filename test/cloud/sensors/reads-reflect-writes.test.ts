import { afterEach, describe, expect, it } from '@jest/globals';
import type { MqttClient } from 'mqtt';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite, shellyActionUrl, type CreatedDevice } from '../../helpers/fixtures.ts';
import { closeClient, connectBridge, createBridge, publish } from '../../helpers/mqtt.ts';

/**
 * Reads reflect writes (docs/api/rules.md): once an ingest, a rule change or a
 * silence has been answered, the very next read of the sensor shows its effect, with `state`,
 * `last_value` and `last_ts` agreeing. Every read here follows its write at once, well within the
 * rule engine's own 1 s kick delay, so none of them can be satisfied by a background pass.
 */
describe.each(DATABASES)('sensor reads right after a write, on %s', (db) => {
  let t: TestCloud;
  let other: TestCloud | undefined;
  let user: SignedIn;
  let siteId: string;
  let device: CreatedDevice;
  const clients: MqttClient[] = [];

  afterEach(async () => {
    for (const c of clients.splice(0)) await closeClient(c);
    await other?.stop();
    other = undefined;
    await t?.stop();
  });

  /** A food-service site: temperature channels get the 0..5 °C rule with 30 minutes of grace. */
  async function start(options: { mqtt?: boolean } = {}): Promise<void> {
    t = await startTestCloud({ db, ...options });
    user = await signUp(t, 'chef@example.com');
    siteId = (await createSite(t, user.token, { vertical: 'food_service' })).id;
    device = await createDevice(t, user.token, siteId, { local_id: 'walk-in' });
  }

  const ingest = async (value: number, on: TestCloud = t) => {
    const answer = await on.http.post(
      '/v1/ingest',
      { device: device.local_id, measurements: [{ type: 'temperature', value }] },
      { token: device.ingest_token },
    );
    expect(answer.status).toBe(200);
    return answer.json as { channels: { channel_id: string }[] };
  };
  const sensorsOf = async (deviceId = device.id, on: TestCloud = t) => {
    const answer = await on.http.get(`/v1/devices/${deviceId}/sensors`, { token: user.token });
    expect(answer.status).toBe(200);
    return answer.json.data as Record<string, any>[];
  };
  const temperatureOf = async (deviceId = device.id, on: TestCloud = t) =>
    (await sensorsOf(deviceId, on)).find((s) => s.kind === 'temperature')!;
  const sensorById = async (id: string) =>
    (await t.http.get(`/v1/sensors/${id}`, { token: user.token })).json as Record<string, any>;

  it('after HTTP ingest: the value and the state it implies, in the list and the sensor object', async () => {
    await start();
    await ingest(3);
    const sensor = await temperatureOf();
    expect(sensor).toMatchObject({ last_value: 3, state: 'ok' });
    expect(sensor.last_ts).toEqual(expect.any(String));
    expect(await sensorById(sensor.id)).toMatchObject({
      last_value: 3,
      state: 'ok',
      last_ts: sensor.last_ts,
    });

    await ingest(9); // out of range: grace begins
    expect(await temperatureOf()).toMatchObject({ last_value: 9, state: 'grace' });
    await ingest(4); // back in range
    expect(await sensorById(sensor.id)).toMatchObject({ last_value: 4, state: 'ok' });
  });

  it('after a rule change: the PATCH answer and every read after it', async () => {
    await start();
    await ingest(3);
    const sensor = await temperatureOf();
    // Grace is that of the rule in force when an excursion starts: set it before the excursion.
    const noGrace = await t.http.patch(`/v1/sensors/${sensor.id}`, { grace_min: 0 }, { token: user.token });
    expect(noGrace.status).toBe(200);
    expect(noGrace.json).toMatchObject({ grace_min: 0, last_value: 3, state: 'ok' });
    await ingest(9);
    expect(await temperatureOf()).toMatchObject({ last_value: 9, state: 'alarm' });

    const off = await t.http.patch(
      `/v1/sensors/${sensor.id}`,
      { rule_enabled: false },
      { token: user.token },
    );
    expect(off.json).toMatchObject({ rule_enabled: false, state: 'silent' });
    expect(await sensorById(sensor.id)).toMatchObject({ state: 'silent' });

    const on = await t.http.patch(`/v1/sensors/${sensor.id}`, { rule_enabled: true }, { token: user.token });
    // The rule judges samples taken while it is enabled: none yet.
    expect(on.json).toMatchObject({ rule_enabled: true, state: 'ok' });
    await ingest(9);
    expect(await sensorById(sensor.id)).toMatchObject({ state: 'alarm' });
    const wider = await t.http.patch(`/v1/sensors/${sensor.id}`, { ok_max: 10 }, { token: user.token });
    // An excursion keeps the bounds it started under until a sample ends it.
    expect(wider.json).toMatchObject({ ok_max: 10, state: 'alarm' });
    await ingest(9);
    expect(await temperatureOf()).toMatchObject({ last_value: 9, state: 'ok' });
  });

  it('after a silence is created and ended', async () => {
    await start();
    await ingest(3);
    const sensor = await temperatureOf();
    await t.http.patch(`/v1/sensors/${sensor.id}`, { grace_min: 0 }, { token: user.token });
    await ingest(9);
    const now = Date.now();
    const silence = await t.http.post(
      `/v1/sensors/${sensor.id}/silence`,
      {
        from: new Date(now - 60_000).toISOString(),
        to: new Date(now + 3_600_000).toISOString(),
        reason: 'defrost',
      },
      { token: user.token },
    );
    expect(silence.status).toBe(201);
    expect(await temperatureOf()).toMatchObject({ state: 'silent' });

    expect((await t.http.delete(`/v1/silences/${silence.json.id}`, { token: user.token })).status).toBe(204);
    expect(await sensorById(sensor.id)).toMatchObject({ state: 'alarm' });
  });

  it('after a Shelly GET', async () => {
    await start();
    const gen1 = await createDevice(t, user.token, siteId, { local_id: 'ht-1', model: 'shelly-ht-gen1' });
    const url = shellyActionUrl(gen1, 3.5);
    expect((await t.http.get(url.pathname + url.search)).status).toBe(200);
    expect(await temperatureOf(gen1.id)).toMatchObject({ last_value: 3.5, state: 'ok' });
  });

  it('after an MQTT publish is acknowledged', async () => {
    await start({ mqtt: true });
    const bundle = await createBridge(t, user.token, siteId);
    const client = await connectBridge(t, bundle);
    clients.push(client);
    const answer = await publish(client, `service/${user.accountId}/fridge-2`, {
      measurements: [{ type: 'temperature', value: 12 }],
    });
    expect(answer.reasonCode).toBe(0);
    const devices = (await t.http.get(`/v1/devices?site_id=${siteId}`, { token: user.token })).json.data;
    const bridged = devices.find((d: any) => d.local_id === 'fridge-2');
    expect(await temperatureOf(bridged.id)).toMatchObject({ last_value: 12, state: 'grace' });
  });

  it('when another process of the same installation took the write', async () => {
    await start();
    other = await startTestCloud({ db, sameDatabaseAs: t });
    await ingest(2, other);
    expect(await temperatureOf(device.id, t)).toMatchObject({ last_value: 2, state: 'ok' });
    await ingest(7, t);
    expect(await temperatureOf(device.id, other)).toMatchObject({ last_value: 7, state: 'grace' });
  });
});
