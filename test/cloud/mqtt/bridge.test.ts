import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { MqttClient } from 'mqtt';
import { createCertificateAuthority, CertificateAuthority } from '../../../cloud/src/pki/certificates.ts';
import { AUTO_CREATE_PER_HOUR } from '../../../cloud/src/devices/auto-create.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createDevice, createSite, measurementCount } from '../../helpers/fixtures.ts';
import {
  closeClient,
  connectBridge,
  createBridge,
  nextMessage,
  publish,
  rawConnect,
  subscribeCodes,
  tryConnect,
  type BridgeBundle,
} from '../../helpers/mqtt.ts';

describe.each(DATABASES)('MQTT bridge on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let siteId: string;
  let bundle: BridgeBundle;
  const clients: MqttClient[] = [];

  const root = () => `service/${user.accountId}`;
  const connect = async (b: BridgeBundle | null = bundle, options = {}) => {
    const c = await connectBridge(t, b, options);
    clients.push(c);
    return c;
  };
  const devicesOf = async (site = siteId, token = user.token) =>
    (await t.http.get(`/v1/devices?site_id=${site}`, { token })).json.data as Record<string, unknown>[];
  const sensorsOf = async (deviceId: string) =>
    (await t.http.get(`/v1/devices/${deviceId}/sensors`, { token: user.token })).json.data;

  beforeEach(async () => {
    t = await startTestCloud({ db, mqtt: true });
    user = await signUp(t, 'ops@example.com');
    siteId = (await createSite(t, user.token, { vertical: 'food_service' })).id;
    bundle = await createBridge(t, user.token, siteId);
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) await closeClient(c);
    await t?.stop();
  });

  describe('a valid bridge', () => {
    it('stores measurements through the ingest core, auto-creating the device on its site, and the PUBACK comes after the commit', async () => {
      const c = await connect();
      const answer = await publish(c, `${root()}/fridge-1`, {
        ts: '2026-01-05T10:00:00Z',
        measurements: [
          { type: 'temperature', value: 4.5 },
          { type: 'humidity', value: 40 },
        ],
      });
      expect(answer.reasonCode).toBe(0);
      // Read right after the PUBACK: committed, not merely queued.
      expect(await measurementCount(t)).toBe(2);
      const [device] = await devicesOf();
      expect(device).toMatchObject({ local_id: 'fridge-1', model: 'mqtt-generic', online: true });
      expect(device!.last_seen_at).toEqual(expect.any(String));
      const sensors = await sensorsOf(device!.id as string);
      expect(sensors.map((s: any) => [s.kind, s.last_value, s.ok_min, s.ok_max])).toEqual(
        expect.arrayContaining([
          ['temperature', 4.5, 0, 5],
          ['humidity', 40, expect.any(Number), expect.any(Number)],
        ]),
      );

      // The same reading again is a no-op (dedup on device, ts, channel), still acknowledged.
      expect(
        (
          await publish(c, `${root()}/fridge-1`, {
            ts: '2026-01-05T10:00:00Z',
            measurements: [{ type: 'temperature', value: 4.5 }],
          })
        ).reasonCode,
      ).toBe(0);
      expect(await measurementCount(t)).toBe(2);
    });

    it('names an existing device by its dev_ id or its local_id on the bridge site', async () => {
      const made = await createDevice(t, user.token, siteId, { local_id: 'door-7', model: 'mqtt-generic' });
      const c = await connect();
      expect(
        (await publish(c, `${root()}/${made.id}`, { measurements: [{ type: 'leak', value: 0 }] })).reasonCode,
      ).toBe(0);
      expect(
        (await publish(c, `${root()}/door-7`, { measurements: [{ type: 'leak', value: 1 }] })).reasonCode,
      ).toBe(0);
      expect(await devicesOf()).toHaveLength(1);
      expect(await sensorsOf(made.id)).toHaveLength(1);
      expect(await measurementCount(t)).toBe(2);
    });

    it('creates the device again when a deleted device keeps publishing (no stale answer from the cache)', async () => {
      const c = await connect();
      const m = { measurements: [{ type: 'temperature', value: 3 }] };
      expect((await publish(c, `${root()}/fridge-1`, m)).reasonCode).toBe(0);
      const first = (await devicesOf())[0]!;
      expect((await t.http.delete(`/v1/devices/${String(first.id)}`, { token: user.token })).status).toBe(
        204,
      );
      expect((await publish(c, `${root()}/fridge-1`, m)).reasonCode).toBe(0);
      const again = await devicesOf();
      expect(again).toEqual([expect.objectContaining({ local_id: 'fridge-1' })]);
      expect(again[0]!.id).not.toBe(first.id);
    });

    it('puts a device auto-created by a bridge on that bridge site, not on another site of the account', async () => {
      const other = (await createSite(t, user.token, { name: 'Cellar' })).id;
      const otherBridge = await createBridge(t, user.token, other, 'Cellar broker');
      const c = await connect(otherBridge);
      expect(
        (await publish(c, `${root()}/fridge-1`, { measurements: [{ type: 'temperature', value: 3 }] }))
          .reasonCode,
      ).toBe(0);
      expect(await devicesOf(siteId)).toHaveLength(0);
      expect(await devicesOf(other)).toEqual([expect.objectContaining({ local_id: 'fridge-1' })]);
    });

    it("creates no device once the bridge's site is deleted (PUBACK 0x87)", async () => {
      const c = await connect();
      expect((await t.http.delete(`/v1/sites/${siteId}`, { token: user.token })).status).toBe(204);
      const refused = await publish(c, `${root()}/fridge-1`, {
        measurements: [{ type: 'temperature', value: 3 }],
      });
      expect([refused.reasonCode, refused.reasonString]).toEqual([
        0x87,
        "forbidden: the bridge's site was deleted",
      ]);
      expect((await t.http.get('/v1/devices?account_id=me', { token: user.token })).json.data).toEqual([]);
    });

    it(`creates at most ${AUTO_CREATE_PER_HOUR} devices an hour; the next new one is PUBACK 0x97, known ones still store`, async () => {
      const c = await connect();
      const m = { measurements: [{ type: 'temperature', value: 3 }] };
      expect((await publish(c, `${root()}/fridge-1`, m)).reasonCode).toBe(0);
      // The rest of the hour's budget, spent as a flood of new local ids would spend it.
      for (let i = 1; i < AUTO_CREATE_PER_HOUR; i++)
        await t.cloud.services.rateLimiter.hit(`device-create:${bundle.id}`, AUTO_CREATE_PER_HOUR, 3600);
      const refused = await publish(c, `${root()}/fridge-2`, m);
      expect(refused.reasonCode).toBe(0x97);
      expect(refused.reasonString).toContain(`at most ${AUTO_CREATE_PER_HOUR} new devices an hour`);
      expect((await devicesOf()).map((d) => d.local_id)).toEqual(['fridge-1']);
      expect((await publish(c, `${root()}/fridge-1`, m)).reasonCode).toBe(0);
    });

    it('shows the bridge connected while it is, with last_seen_at', async () => {
      const c = await connect();
      // Presence is recorded in the database (any replica answers), just after the CONNACK.
      await eventually(
        async () => (await t.http.get('/v1/bridges', { token: user.token })).json.data[0]?.connected === true,
        'the bridge to show connected',
      );
      const listed = (await t.http.get('/v1/bridges', { token: user.token })).json.data;
      expect(listed).toEqual([
        expect.objectContaining({ id: bundle.id, connected: true, last_seen_at: expect.any(String) }),
      ]);
      await c.endAsync();
      await eventually(
        async () =>
          (await t.http.get(`/v1/bridges/${bundle.id}`, { token: user.token })).json.connected === false,
        'the bridge to show disconnected',
      );
    });
  });

  describe('refused connections', () => {
    it('refuses a client without a certificate at the TLS handshake', async () => {
      expect((await tryConnect(t, null, { ca: bundle.ca_pem })).outcome).not.toBe('connected');
      expect(t.logs.some((l) => l.msg === 'MQTT TLS handshake refused')).toBe(true);
    });

    it('refuses a certificate from another CA, even with the right CN', async () => {
      const now = new Date();
      const foreign = await CertificateAuthority.load(
        await createCertificateAuthority({ commonName: 'Someone else', now, days: 30 }),
      );
      const cert = await foreign.issueClient({
        accountId: user.accountId,
        bridgeId: bundle.id,
        now,
        days: 30,
      });
      const answer = await tryConnect(t, {
        cert_pem: cert.certPem,
        key_pem: cert.keyPem,
        ca_pem: bundle.ca_pem,
      });
      expect(answer.outcome).not.toBe('connected');
      expect(answer.code).toBeUndefined(); // refused by TLS, never reached MQTT
    });

    it('refuses a revoked certificate, and drops its live connection at once', async () => {
      const c = await connect();
      const dropped = new Promise<number | undefined>((resolve) =>
        c.once('disconnect', (p) => resolve(p.reasonCode)),
      );
      expect((await t.http.delete(`/v1/bridges/${bundle.id}`, { token: user.token })).status).toBe(204);
      expect(await dropped).toBe(0x87);
      await expect(connect()).rejects.toMatchObject({ code: 0x87 });
      expect(t.logs.some((l) => String(l.msg).includes('MQTT connection refused: bridge deleted'))).toBe(
        true,
      );
    });

    it('refuses MQTT 3.1.1 and 3.1 with "unacceptable protocol version"', async () => {
      await expect(connect(bundle, { protocolVersion: 4 })).rejects.toMatchObject({ code: 1 });
      await expect(connect(bundle, { protocolVersion: 3, protocolId: 'MQIsdp' })).rejects.toMatchObject({
        code: 1,
      });
    });
  });

  describe('the account topic root', () => {
    it("refuses publishes under another account's root and stores nothing of them", async () => {
      const other = await signUp(t, 'other@example.com');
      const otherSite = (await createSite(t, other.token)).id;
      const c = await connect();
      const answer = await publish(c, `service/${other.accountId}/fridge-1`, {
        measurements: [{ type: 'temperature', value: 4 }],
      });
      expect(answer.reasonCode).toBe(0x87);
      expect(answer.reasonString).toMatch(/may publish under service\/acc_/);
      for (const topic of ['fridge-1', 'elsewhere/x', '$SYS/x']) {
        expect(
          (await publish(c, topic, { measurements: [{ type: 'temperature', value: 4 }] })).reasonCode,
        ).toBe(0x87);
      }
      // The connection stays up and still works inside its own root.
      expect(
        (await publish(c, `${root()}/fridge-2`, { measurements: [{ type: 'temperature', value: 4 }] }))
          .reasonCode,
      ).toBe(0);
      expect(await devicesOf(otherSite, other.token)).toHaveLength(0);
      expect(await measurementCount(t)).toBe(1);
      expect(
        t.logs.some((l) => String(l.msg).includes('MQTT publish refused: outside the account topic root')),
      ).toBe(true);
    });

    it("cannot take over another bridge's session by using its client id", async () => {
      const other = await signUp(t, 'other@example.com');
      const otherBundle = await createBridge(t, other.token, (await createSite(t, other.token)).id);
      const mine = await connect(bundle, { clientId: 'gateway', clean: false });
      await mine.subscribeAsync(`${root()}/+/cmd/#`, { qos: 1 });
      const theirs = await connect(otherBundle, { clientId: 'gateway', clean: false });
      expect(theirs.connected).toBe(true);
      // Still connected and still subscribed: a command reaches the first bridge.
      const fridge = await createDevice(t, user.token, siteId, {
        local_id: 'fridge-1',
        model: 'mqtt-generic',
      });
      const got = nextMessage(mine, () => true);
      expect(
        (await t.http.post(`/v1/devices/${fridge.id}/identify`, undefined, { token: user.token })).json,
      ).toEqual({ status: 'sent' });
      expect((await got).topic).toBe(`${root()}/fridge-1/cmd/identify`);
      expect(mine.connected).toBe(true);
    });

    it('refuses subscriptions outside the root, filter by filter', async () => {
      const c = await connect();
      expect(await subscribeCodes(c, [`${root()}/+/cmd/#`, 'service/#', '#'])).toEqual([1, 0x87, 0x87]);
    });

    it('does not forward uplinks to other connections of the account', async () => {
      const listener = await connect();
      await listener.subscribeAsync(`${root()}/#`, { qos: 1 });
      const c = await connect();
      const seen: string[] = [];
      listener.on('message', (topic) => seen.push(topic));
      await publish(c, `${root()}/fridge-1`, { measurements: [{ type: 'temperature', value: 4 }] });
      // A downlink sent after the uplink arrives first: the uplink was never forwarded.
      const device = (await devicesOf())[0]!;
      const cmd = nextMessage(listener, (topic) => topic.endsWith('/cmd/identify'));
      expect(
        (await t.http.post(`/v1/devices/${String(device.id)}/identify`, undefined, { token: user.token }))
          .json,
      ).toEqual({ status: 'sent' });
      await cmd;
      expect(seen).toEqual([`${root()}/fridge-1/cmd/identify`]);
    });
  });

  describe('QoS', () => {
    it('drops QoS 0 silently and keeps the connection', async () => {
      const c = await connect();
      await publish(c, `${root()}/q0`, { measurements: [{ type: 'temperature', value: 4 }] }, { qos: 0 });
      // Packets of one connection are handled in order: once this PUBACK is back, the QoS 0 one was seen.
      expect(
        (await publish(c, `${root()}/q1`, { measurements: [{ type: 'temperature', value: 4 }] })).reasonCode,
      ).toBe(0);
      expect((await devicesOf()).map((d) => d.local_id)).toEqual(['q1']);
      expect(await measurementCount(t)).toBe(1);
    });

    it('stores a QoS 2 publish once, also when the PUBLISH is sent again before PUBREL', async () => {
      const c = await connect();
      expect(
        (await publish(c, `${root()}/q2`, { measurements: [{ type: 'temperature', value: 4 }] }, { qos: 2 }))
          .reasonCode,
      ).toBe(0);
      expect(await measurementCount(t)).toBe(1);

      // A raw client resends the same QoS 2 PUBLISH (DUP) before releasing it; no `ts`, so only the
      // exactly-once handling keeps the second copy out.
      const raw = await rawConnect(t, bundle, { clientId: 'raw-q2' });
      const publishPacket = {
        cmd: 'publish' as const,
        topic: `${root()}/q2-raw`,
        payload: Buffer.from(JSON.stringify({ measurements: [{ type: 'temperature', value: 5 }] })),
        qos: 2 as const,
        messageId: 7,
        dup: false,
        retain: false,
      };
      expect(raw.connack).toMatchObject({ reasonCode: 0 });
      raw.send(publishPacket);
      expect(await raw.next('pubrec')).toMatchObject({ messageId: 7 });
      raw.send({ ...publishPacket, dup: true });
      expect(await raw.next('pubrec')).toMatchObject({ messageId: 7 });
      raw.send({ cmd: 'pubrel', messageId: 7 });
      expect(await raw.next('pubcomp')).toMatchObject({ messageId: 7 });
      raw.socket.destroy();
      expect(await measurementCount(t)).toBe(2);
    });
  });

  describe('rejected payloads', () => {
    it('answers each with its PUBACK reason code and reason string, and stores nothing', async () => {
      const c = await connect();
      const cases: [string, unknown, number, RegExp][] = [
        [`${root()}/a`, 'not json', 0x99, /^bad_json: /],
        [`${root()}/a`, '', 0x99, /^bad_json: /],
        [`${root()}/a`, {}, 0x99, /^no_measurements: /],
        [`${root()}/a`, { measurements: 'x' }, 0x99, /^invalid_measurement: /],
        [`${root()}/a`, { measurements: [{ type: 'temperature' }] }, 0x99, /^invalid_measurement: /],
        [
          `${root()}/a`,
          { ts: '2026-01-05 10:00', measurements: [{ type: 'temperature', value: 1 }] },
          0x99,
          /^invalid_request: /,
        ],
        [`${root()}/a`, { measurements: [{ type: 'wind', value: 1 }] }, 0x83, /^unknown_kind: /],
        [
          `${root()}/a`,
          { measurements: [{ type: 'temperature', value: 500 }] },
          0x83,
          /^out_of_range: .*sanity range/,
        ],
        [
          `${root()}/a`,
          { device: 'b', measurements: [{ type: 'temperature', value: 1 }] },
          0x87,
          /^forbidden: /,
        ],
        [`${root()}/a/lwt`, { status: 'sleeping' }, 0x99, /^invalid_request: the lwt payload/],
        [`${root()}/a/info`, { fw_version: 7 }, 0x99, /^invalid_request: the info payload/],
        [`${root()}/a/b`, { measurements: [{ type: 'temperature', value: 1 }] }, 0x90, /^invalid_topic: /],
        [`${root()}/a b`, { measurements: [{ type: 'temperature', value: 1 }] }, 0x90, /^invalid_topic: /],
        [`${root()}/a/cmd/identify`, { duration_s: 30 }, 0x87, /^forbidden: cmd\//],
      ];
      for (const [topic, payload, code, reason] of cases) {
        const answer = await publish(c, topic, payload);
        expect({ topic, payload, code: answer.reasonCode }).toEqual({ topic, payload, code });
        expect(answer.reasonString).toMatch(reason);
      }
      // QoS 2 is refused with PUBREC and the same code.
      expect((await publish(c, `${root()}/a`, 'x', { qos: 2 })).reasonCode).toBe(0x99);
      expect(await devicesOf()).toHaveLength(0);
      expect(await measurementCount(t)).toBe(0);
    });
  });

  describe('last-will, online and info', () => {
    it('flips online with lwt, records fw_version from info, and creates the device with the model of its first info', async () => {
      // The ingest core's device-state hook (device.online / device.offline webhooks) sees each flip.
      const flips: { localId: string; online: boolean }[] = [];
      t.cloud.services.ingest.onDeviceState((changes) => {
        for (const change of changes) flips.push({ localId: change.localId, online: change.online });
      });
      const c = await connect();
      expect(
        (
          await publish(
            c,
            `${root()}/plug-1/info`,
            { fw_version: '1.4.2', model: 'shelly-plus-1pm' },
            { retain: true },
          )
        ).reasonCode,
      ).toBe(0);
      let [device] = await devicesOf();
      expect(device).toMatchObject({
        local_id: 'plug-1',
        model: 'shelly-plus-1pm',
        fw_version: '1.4.2',
        online: false,
      });

      expect(
        (
          await publish(
            c,
            `${root()}/plug-1/lwt`,
            { status: 'online', at: '2026-01-05T10:00:00Z' },
            { retain: true },
          )
        ).reasonCode,
      ).toBe(0);
      [device] = await devicesOf();
      expect(device).toMatchObject({ online: true, last_seen_at: expect.any(String) });

      expect(
        (
          await publish(
            c,
            `${root()}/plug-1/lwt`,
            { status: 'offline', reason: 'connection lost', at: '2026-01-05T10:00:00Z' },
            { retain: true, qos: 2 },
          )
        ).reasonCode,
      ).toBe(0);
      [device] = await devicesOf();
      expect(device).toMatchObject({ online: false });

      // A later info keeps the (immutable) model and moves the firmware.
      expect(
        (await publish(c, `${root()}/plug-1/info`, { fw_version: '1.5.0', model: 'mqtt-generic' }))
          .reasonCode,
      ).toBe(0);
      [device] = await devicesOf();
      expect(device).toMatchObject({ model: 'shelly-plus-1pm', fw_version: '1.5.0' });

      // An empty retained message (clearing the broker's copy) is acknowledged and changes nothing.
      expect((await publish(c, `${root()}/plug-1/lwt`, '', { retain: true })).reasonCode).toBe(0);
      expect((await devicesOf())[0]).toMatchObject({ online: false });
      expect(flips).toEqual([
        { localId: 'plug-1', online: true },
        { localId: 'plug-1', online: false },
      ]);
    });

    it("processes the bridge connection's own will (a gateway announcing a device offline)", async () => {
      await createDevice(t, user.token, siteId, { local_id: 'gw', model: 'gateway-pi' });
      const c = await connect(bundle, {
        will: {
          topic: `${root()}/gw/lwt`,
          payload: Buffer.from(JSON.stringify({ status: 'offline', reason: 'gateway lost' })),
          qos: 1,
          retain: true,
          properties: { willDelayInterval: 0 },
        },
      });
      expect((await publish(c, `${root()}/gw/lwt`, { status: 'online' })).reasonCode).toBe(0);
      expect((await devicesOf())[0]).toMatchObject({ online: true });
      c.stream.destroy(); // not a clean DISCONNECT: the broker publishes the will
      await eventually(
        async () => (await devicesOf())[0]?.online === false,
        'the will to mark the device offline',
      );
    });
  });

  describe('identify', () => {
    it('publishes cmd/identify to the bridges of the device site only, and answers 202 {status}', async () => {
      const cellar = (await createSite(t, user.token, { name: 'Cellar' })).id;
      const cellarBridge = await createBridge(t, user.token, cellar, 'Cellar broker');
      const kitchen = await connect();
      const other = await connect(cellarBridge);
      await kitchen.subscribeAsync(`${root()}/+/cmd/#`, { qos: 1 });
      await other.subscribeAsync(`${root()}/+/cmd/#`, { qos: 1 });
      const fridge = await createDevice(t, user.token, siteId, {
        local_id: 'fridge-1',
        model: 'mqtt-generic',
      });
      const freezer = await createDevice(t, user.token, cellar, {
        local_id: 'freezer-1',
        model: 'shelly-plus-1pm',
      });

      const atKitchen = nextMessage(kitchen, () => true);
      const atCellar = nextMessage(other, () => true);
      const answer = await t.http.post(`/v1/devices/${fridge.id}/identify`, undefined, { token: user.token });
      expect(answer.status).toBe(202);
      expect(answer.json).toEqual({ status: 'sent' });
      const got = await atKitchen;
      expect(got.topic).toBe(`${root()}/fridge-1/cmd/identify`);
      expect(JSON.parse(got.payload.toString())).toEqual({ duration_s: 30, at: expect.any(String) });
      expect(got.packet.qos).toBe(1);
      expect(got.packet.properties?.userProperties).toEqual({ site_id: siteId });

      // The cellar bridge's first command is its own device's: the kitchen's never reached it.
      expect(
        (await t.http.post(`/v1/devices/${freezer.id}/identify`, undefined, { token: user.token })).json,
      ).toEqual({ status: 'sent' });
      expect((await atCellar).topic).toBe(`${root()}/freezer-1/cmd/identify`);
    });

    it('answers unsupported for models that cannot blink and unreachable without a connected bridge', async () => {
      const gen1 = await createDevice(t, user.token, siteId, { model: 'shelly-ht-gen1' });
      const plusHt = await createDevice(t, user.token, siteId, { model: 'shelly-plus-ht' });
      const plain = await createDevice(t, user.token, siteId, { model: 'mqtt-generic' });
      const post = (id: string) =>
        t.http.post(`/v1/devices/${id}/identify`, undefined, { token: user.token });
      expect((await post(gen1.id)).json).toEqual({ status: 'unsupported' });
      // A Plus H&T sleeps between reports and has nothing to blink: the models list says so too.
      expect((await post(plusHt.id)).json).toEqual({ status: 'unsupported' });
      const models = (await t.http.get('/v1/models', { token: user.token })).json as {
        data: { model: string; identify: boolean }[];
      };
      expect(models.data.find((m) => m.model === 'shelly-plus-ht')?.identify).toBe(false);
      expect(await post(plain.id)).toMatchObject({ status: 202, json: { status: 'unreachable' } });
      expect((await post('dev_nope')).json.error.code).toBe('device_not_found');
    });
  });
});
