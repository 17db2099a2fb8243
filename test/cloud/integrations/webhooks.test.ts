import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  chirpstackJoinJson,
  chirpstackLogJson,
  chirpstackStatusJson,
  chirpstackStatusProtobuf,
  chirpstackUpJson,
  chirpstackUpProtobuf,
  ttsJoinAcceptJson,
  ttsUplinkJson,
} from '../../../hardware/emulators/lorawan-webhook.ts';
import { AUTO_CREATE_PER_HOUR } from '../../../cloud/src/devices/auto-create.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite } from '../../helpers/fixtures.ts';

const LPP = Buffer.from('03670110056700FF', 'hex'); // 27.2 °C on channel 3, 25.5 °C on channel 5
const LHT65 = Buffer.from('CBF60B0D0376010ADD7FFF', 'hex'); // 3.062 V, 28.29 °C, 88.6 %, probe 27.81 °C
const T0 = Date.UTC(2026, 0, 5, 10, 0, 0);
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', '.000000Z');

describe.each(DATABASES)('LoRaWAN webhooks and Shelly integration tokens on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let siteId: string;
  let chirpstack: string;
  let ttn: string;

  beforeEach(async () => {
    t = await startTestCloud({ db });
    user = await signUp(t, 'ops@example.com');
    siteId = (await createSite(t, user.token)).id;
    chirpstack = await integration('chirpstack');
    ttn = await integration('ttn');
  });
  afterEach(async () => t?.stop());

  async function integration(kind: string, site = siteId, token = user.token): Promise<string> {
    const answer = await t.http.post('/v1/integrations', { kind, site_id: site, name: kind }, { token });
    if (answer.status !== 201) throw new Error(`${answer.status} ${answer.text}`);
    return answer.json.token;
  }
  const postChirpstack = (event: string, body: string | Buffer, token = chirpstack) =>
    t.http.post(`/v1/webhooks/chirpstack?event=${event}`, undefined, {
      token,
      raw: body,
      headers: { 'content-type': typeof body === 'string' ? 'application/json' : 'application/octet-stream' },
    });
  const postTtn = (body: string, token = ttn) =>
    t.http.post('/v1/webhooks/ttn', undefined, {
      token,
      raw: body,
      headers: { 'content-type': 'application/json' },
    });
  const deviceOf = async (localId: string, site = siteId, token = user.token) =>
    (await t.http.get(`/v1/devices?site_id=${site}`, { token })).json.data.find(
      (d: { local_id: string }) => d.local_id === localId,
    );
  /** Every stored point of the device, as `kind/label@ts=value`. */
  async function points(deviceId: string): Promise<string[]> {
    const sensors = (await t.http.get(`/v1/devices/${deviceId}/sensors`, { token: user.token })).json.data;
    const out: string[] = [];
    for (const s of sensors) {
      const read = await t.http.get(`/v1/channels/${s.channel_id}/measurements?from=2000-01-01T00:00:00Z`, {
        token: user.token,
      });
      for (const p of read.json.data) out.push(`${s.kind}/${s.label ?? '-'}@${p.ts}=${p.value}`);
    }
    return out.sort();
  }

  it(`creates at most ${AUTO_CREATE_PER_HOUR} devices an hour for one integration; known devices keep delivering`, async () => {
    const up = (devEui: string) => chirpstackUpJson({ devEui, time: T0, data: LPP });
    expect((await postChirpstack('up', up('A84041000181C001'))).status).toBe(200);
    const [mine] = (await t.http.get('/v1/integrations', { token: user.token })).json.data.filter(
      (i: { kind: string }) => i.kind === 'chirpstack',
    );
    // The rest of the hour's budget, spent as a flood of new DevEUIs would spend it.
    for (let i = 1; i < AUTO_CREATE_PER_HOUR; i++)
      await t.cloud.services.rateLimiter.hit(`device-create:${mine.id}`, AUTO_CREATE_PER_HOUR, 3600);
    const refused = await postChirpstack('up', up('A84041000181C002'));
    expect([refused.status, refused.json.error.code]).toEqual([429, 'rate_limited']);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.json.error.message).toContain(`at most ${AUTO_CREATE_PER_HOUR} new devices an hour`);
    expect(await deviceOf('a84041000181c002')).toBeUndefined();
    expect((await postChirpstack('up', up('A84041000181C001'))).status).toBe(200);
    // Another integration, even of the same site, has its own budget.
    expect(
      (await postTtn(ttsUplinkJson({ devEui: 'A84041000181C003', receivedAt: T0, data: LPP }))).status,
    ).toBe(200);
  });

  it('stores a ChirpStack JSON up event: the decoded object, the best RSSI, the network time, on a device created by DevEUI', async () => {
    const answer = await postChirpstack(
      'up',
      chirpstackUpJson({
        devEui: 'A84041000181C0DE',
        time: T0,
        data: LPP,
        object: { temperatureSensor: { '3': 27.2, '5': 25.5 } },
        rx: [
          { gatewayId: '0016c001f153a14c', rssi: -112, snr: -3 },
          { gatewayId: '0016c001f153a14d', rssi: -97, snr: 7.5 },
        ],
      }),
    );
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({ accepted: 3, deduplicated: 0 });
    const device = await deviceOf('a84041000181c0de');
    expect(device).toMatchObject({ model: 'lorawan-generic', online: true, name: 'a84041000181c0de' });
    expect(answer.json.device_id).toBe(device.id);
    expect(await points(device.id)).toEqual([
      `signal/-@${iso(T0)}=-97`,
      `temperature/3@${iso(T0)}=27.2`,
      `temperature/5@${iso(T0)}=25.5`,
    ]);
  });

  it("decodes a protobuf up event without an object with the device model's decoder", async () => {
    await createDevice(t, user.token, siteId, { local_id: '0101010101010101', model: 'cayenne-lpp' });
    const lht = await createDevice(t, user.token, siteId, {
      local_id: 'a840410000000001',
      model: 'dragino-lht65',
    });
    const lpp = await postChirpstack(
      'up',
      chirpstackUpProtobuf({ devEui: '0101010101010101', time: T0, data: LPP }),
    );
    expect([lpp.status, lpp.json.accepted]).toEqual([200, 3]);
    expect(
      (
        await postChirpstack(
          'up',
          chirpstackUpProtobuf({ devEui: 'a840410000000001', time: T0, fPort: 2, data: LHT65 }),
        )
      ).json.accepted,
    ).toBe(5);
    expect(await points(lht.id)).toEqual([
      `battery/-@${iso(T0)}=3.062`,
      `humidity/-@${iso(T0)}=88.6`,
      `signal/-@${iso(T0)}=-97`,
      `temperature/-@${iso(T0)}=28.29`,
      `temperature/ext@${iso(T0)}=27.81`,
    ]);
  });

  it('delivers to a device registered with its DevEUI in upper case instead of creating a second one', async () => {
    const lht = await createDevice(t, user.token, siteId, {
      local_id: 'A840410000000002',
      model: 'dragino-lht65',
    });
    const viaChirpstack = await postChirpstack(
      'up',
      chirpstackUpJson({ devEui: 'a840410000000002', time: T0, fPort: 2, data: LHT65 }),
    );
    expect([viaChirpstack.status, viaChirpstack.json.device_id]).toEqual([200, lht.id]);
    const viaProtobuf = await postChirpstack(
      'up',
      chirpstackUpProtobuf({ devEui: 'A840410000000002', time: T0 + 60_000, fPort: 2, data: LHT65 }),
    );
    expect([viaProtobuf.status, viaProtobuf.json.device_id]).toEqual([200, lht.id]);
    const devices = (await t.http.get(`/v1/devices?site_id=${siteId}`, { token: user.token })).json.data;
    expect(devices.map((d: { local_id: string }) => d.local_id)).toEqual(['A840410000000002']);
    expect(await points(lht.id)).toContain(`temperature/-@${iso(T0 + 60_000)}=28.29`);
  });

  it("falls back to the model's decoder when the network server's object has no field it knows", async () => {
    await createDevice(t, user.token, siteId, { local_id: '0b0b0b0b0b0b0b0b', model: 'cayenne-lpp' });
    const answer = await postChirpstack(
      'up',
      chirpstackUpJson({
        devEui: '0b0b0b0b0b0b0b0b',
        data: LPP,
        object: { payload_hex: '03670110056700ff' },
      }),
    );
    expect(
      answer.json.channels.map((c: { type: string; label: string | null }) => `${c.type}/${c.label}`),
    ).toEqual(['temperature/3', 'temperature/5', 'signal/null']);
  });

  it('refuses the token of an integration whose site was deleted', async () => {
    const spare = (await createSite(t, user.token, { name: 'Spare' })).id;
    const token = await integration('ttn', spare);
    expect((await postTtn(ttsJoinAcceptJson('A840410000000010'), token)).status).toBe(200);
    const devices = (await t.http.get(`/v1/devices?site_id=${spare}`, { token: user.token })).json.data;
    for (const d of devices) await t.http.delete(`/v1/devices/${d.id}`, { token: user.token });
    expect((await t.http.delete(`/v1/sites/${spare}`, { token: user.token })).status).toBe(204);
    const after = await postTtn(ttsJoinAcceptJson('A840410000000011'), token);
    expect([after.status, after.json.error.code]).toEqual([401, 'token_invalid']);
  });

  it('stores an uplink delivered twice once, with or without a network time', async () => {
    for (const [encoding, body] of [
      [
        'json',
        chirpstackUpJson({ devEui: '0202020202020202', time: null, data: LPP, object: { temperature: 4.5 } }),
      ],
      [
        'protobuf',
        chirpstackUpProtobuf({
          devEui: '0303030303030303',
          time: T0,
          data: LPP,
          object: { temperature: 4.5 },
        }),
      ],
    ] as const) {
      const first = await postChirpstack('up', body);
      const again = await postChirpstack('up', body);
      expect([encoding, first.json.accepted, again.json.accepted, again.json.deduplicated]).toEqual([
        encoding,
        2,
        0,
        2,
      ]);
    }
    const device = await deviceOf('0202020202020202');
    expect((await points(device.id)).length).toBe(2);
  });

  it('answers 200 for a payload it cannot decode, and 4xx for a malformed body', async () => {
    const undecodable = await postChirpstack(
      'up',
      chirpstackUpJson({ devEui: '0404040404040404', data: Buffer.from('zz') }),
    );
    expect(undecodable.status).toBe(200);
    expect(undecodable.json.channels.map((c: { type: string }) => c.type)).toEqual(['signal']);
    expect(t.logs.some((l) => String(l.msg).startsWith('uplink payload not decoded'))).toBe(true);
    const unknownField = await postChirpstack(
      'up',
      chirpstackUpJson({ devEui: '0404040404040404', data: LPP, object: { temperature: 5, mode: 'x' } }),
    );
    expect(unknownField.json.accepted).toBe(2);
    await postChirpstack(
      'up',
      chirpstackUpJson({ devEui: '0404040404040404', data: LPP, object: { mode: 'y' } }),
    );
    expect(
      t.logs.filter((l) => String(l.msg).startsWith('decoded fields without a known meaning')),
    ).toHaveLength(1);

    for (const [what, answer, code] of [
      ['not JSON', await postChirpstack('up', '{"deviceInfo":'), 'bad_json'],
      ['no DevEUI', await postChirpstack('up', JSON.stringify({ deviceInfo: {} })), 'bad_json'],
      ['not protobuf', await postChirpstack('up', Buffer.from('ffffffff', 'hex')), 'invalid_request'],
      [
        'no event',
        await t.http.post('/v1/webhooks/chirpstack', undefined, { token: chirpstack, raw: '{}' }),
        'invalid_request',
      ],
    ] as const)
      expect([what, answer.status, answer.json.error.code]).toEqual([what, 400, code]);
  });

  it('takes the battery from status events, marks joined devices online, and records the rest', async () => {
    const status = await postChirpstack('status', chirpstackStatusJson('0505050505050505', 87.4, T0));
    expect([status.status, status.json.accepted]).toEqual([200, 1]);
    const device = await deviceOf('0505050505050505');
    expect(await points(device.id)).toEqual([`battery/-@${iso(T0)}=87.4`]);
    expect(
      (await postChirpstack('status', chirpstackStatusProtobuf('0505050505050505', 86, T0 + 1000))).json
        .accepted,
    ).toBe(1);
    expect(
      (await postChirpstack('status', chirpstackStatusJson('0505050505050505', null))).json.accepted,
    ).toBe(0);

    const join = await postChirpstack('join', chirpstackJoinJson('0606060606060606'));
    expect(join.status).toBe(200);
    expect(await deviceOf('0606060606060606')).toMatchObject({ online: true });

    const log = await postChirpstack('log', chirpstackLogJson('0707070707070707'));
    expect([log.status, log.json]).toEqual([200, { recorded: 'log' }]);
    expect(await deviceOf('0707070707070707')).toBeUndefined();
    expect((await postChirpstack('txack', '{"deviceInfo":{"devEui":"0707070707070707"}}')).status).toBe(200);
    expect((await postChirpstack('something-new', '{}')).json).toEqual({
      ignored: 'unknown event type something-new',
    });
  });

  it('stores The Things Stack uplinks with their zero fields omitted, once per correlation id', async () => {
    const body = ttsUplinkJson({
      devEui: 'A840410000000002',
      receivedAt: T0 + 500,
      // f_cnt 0 and f_port left out, as TTS does
      data: LHT65,
      decodedPayload: {
        BatV: 3.062,
        Bat_status: 3,
        TempC_SHT: 28.29,
        Hum_SHT: 88.6,
        TempC_DS: 27.81,
        Ext_sensor: 'Temperature Sensor',
      },
      rx: [{ gatewayId: '0016c001f153a14c', rssi: -101, snr: 2, time: T0 }],
    });
    const first = await postTtn(body);
    expect([first.status, first.json.accepted]).toEqual([200, 5]);
    expect((await postTtn(body)).json).toMatchObject({ accepted: 0, deduplicated: 5 });
    const device = await deviceOf('a840410000000002');
    expect(await points(device.id)).toContain(`temperature/-@${iso(T0)}=28.29`);

    const lpp = await postTtn(
      ttsUplinkJson({
        devEui: 'A840410000000003',
        fCnt: 7,
        fPort: 8,
        decodedPayload: { temperature_3: 27.2, temperature_5: 25.5 },
      }),
    );
    expect(lpp.json.channels.map((c: { label: string | null }) => c.label)).toEqual(['3', '5', null]);
    const noPayload = await postTtn(ttsUplinkJson({ devEui: 'A840410000000004', rx: [] }));
    expect([noPayload.status, noPayload.json.accepted]).toEqual([200, 0]);
    expect((await postTtn(ttsJoinAcceptJson('A840410000000005'))).status).toBe(200);
    expect(await deviceOf('a840410000000005')).toMatchObject({ online: true });
    expect((await postTtn(ttsUplinkJson({}))).json).toEqual({ ignored: 'the end device has no DevEUI' });
    expect((await postTtn('[')).json.error.code).toBe('bad_json');
  });

  it('answers alike on the fast path and through Express (another spelling of the path)', async () => {
    const body = (dedup: string) =>
      chirpstackUpJson({
        devEui: '0a0a0a0a0a0a0a0a',
        deduplicationId: dedup,
        time: T0,
        data: LPP,
        object: { temperature: 3 },
      });
    const send = (path: string, raw: string, token = chirpstack) =>
      t.http.post(path, undefined, { token, raw, headers: { 'content-type': 'application/json' } });
    const fast = await send('/v1/webhooks/chirpstack?event=up', body('a'));
    const viaExpress = await send('/v1/webhooks/chirpstack/?event=up', body('a'));
    expect([fast.status, viaExpress.status]).toEqual([200, 200]);
    expect(viaExpress.json).toEqual({ ...fast.json, accepted: 0, deduplicated: 2 });
    for (const [path, raw, token] of [
      ['?event=up', '{', chirpstack],
      ['?event=up', body('b'), 'whk_wrong'],
      ['', body('c'), chirpstack],
    ] as const) {
      const a = await send(`/v1/webhooks/chirpstack${path}`, raw, token);
      const b = await send(`/v1/webhooks/chirpstack/${path}`, raw, token);
      expect([b.status, b.json.error.code]).toEqual([a.status, a.json.error.code]);
      expect(a.headers.get('x-request-id')).toMatch(/^req_/);
    }
    const tts = ttsUplinkJson({ devEui: 'A840410000000009', decodedPayload: { temperature: 5 } });
    const ttsFast = await postTtn(tts);
    const ttsExpress = await t.http.post('/v1/webhooks/ttn?via=express', undefined, {
      token: ttn,
      raw: tts,
      headers: { 'content-type': 'application/json' },
    });
    expect(ttsExpress.json).toEqual({ ...ttsFast.json, accepted: 0, deduplicated: 2 });
  });

  it('refuses a wrong, deleted or rotated token with 401, and a token of another kind with 403', async () => {
    const body = chirpstackUpJson({ devEui: '0808080808080808', data: LPP });
    const wrong = await postChirpstack('up', body, `whk_${'x'.repeat(43)}`);
    expect([wrong.status, wrong.json.error.code]).toEqual([401, 'token_invalid']);
    const none = await t.http.post('/v1/webhooks/chirpstack?event=up', undefined, { raw: body });
    expect([none.status, none.json.error.code]).toEqual([401, 'token_invalid']);
    const other = await postChirpstack('up', body, ttn);
    expect([other.status, other.json.error.code]).toEqual([403, 'forbidden']);
    expect((await postTtn(body, chirpstack)).status).toBe(403);
    const id = (await t.http.get('/v1/integrations', { token: user.token })).json.data[0].id;
    const rotated = await t.http.post(`/v1/integrations/${id}/rotate-token`, undefined, {
      token: user.token,
    });
    expect((await postChirpstack('up', body)).status).toBe(401);
    expect((await postChirpstack('up', body, rotated.json.token)).status).toBe(200);
    await t.http.delete(`/v1/integrations/${id}`, { token: user.token });
    expect((await postChirpstack('up', body, rotated.json.token)).status).toBe(401);
  });

  it("never reaches another account's site: the same DevEUI lands on the token's own site", async () => {
    const mine = await createDevice(t, user.token, siteId, {
      local_id: '0909090909090909',
      model: 'cayenne-lpp',
    });
    const b = await signUp(t, 'b@example.com');
    const bSite = (await createSite(t, b.token)).id;
    const bToken = await integration('chirpstack', bSite, b.token);
    const answer = await postChirpstack(
      'up',
      chirpstackUpProtobuf({ devEui: '0909090909090909', data: LPP }),
      bToken,
    );
    expect(answer.status).toBe(200);
    expect(answer.json.device_id).not.toBe(mine.id);
    expect(await deviceOf('0909090909090909', bSite, b.token)).toMatchObject({ id: answer.json.device_id });
    expect(await points(mine.id)).toEqual([]);
  });

  it('takes Shelly URL actions with an integration token for any device of its site, and keeps device tokens working', async () => {
    const token = await integration('shelly');
    const first = await t.http.get(`/v1/ingest/shelly?token=${token}&device=ht-kitchen&temp=4.5&hum=61`);
    expect([first.status, first.json.accepted]).toEqual([200, 2]);
    expect(await deviceOf('ht-kitchen')).toMatchObject({ model: 'shelly-ht-gen1' });
    // a Gen1 H&T appends hum, temp and id to the configured URL
    const gen1 = await t.http.get(`/v1/ingest/shelly?token=${token}&hum=89&temp=9.88&id=shellyht-EE45E9`);
    expect(gen1.status).toBe(200);
    expect(await deviceOf('shellyht-EE45E9')).toBeDefined();
    const gen3 = await t.http.get(
      `/v1/ingest/shelly?token=${token}&device=htg3&model=shelly-ht-gen3&hum=50&battery=3.1`,
    );
    expect(gen3.status).toBe(200);
    expect(await deviceOf('htg3')).toMatchObject({ model: 'shelly-ht-gen3' });
    const noDevice = await t.http.get(`/v1/ingest/shelly?token=${token}&temp=4`);
    expect([noDevice.status, noDevice.json.error.code]).toEqual([400, 'invalid_request']);
    const badModel = await t.http.get(`/v1/ingest/shelly?token=${token}&device=x1&model=toaster&temp=4`);
    expect([badModel.status, badModel.json.error.code]).toEqual([400, 'invalid_request']);
    const wrong = await t.http.get(`/v1/ingest/shelly?token=${chirpstack}&device=ht-kitchen&temp=4`);
    expect([wrong.status, wrong.json.error.code]).toEqual([403, 'forbidden']);
    const unknown = await t.http.get(`/v1/ingest/shelly?token=whk_nope&device=ht-kitchen&temp=4`);
    expect([unknown.status, unknown.json.error.code]).toEqual([401, 'token_invalid']);

    const own = await createDevice(t, user.token, siteId, { local_id: 'ht-own', model: 'shelly-ht-gen1' });
    const plain = await t.http.get(`/v1/ingest/shelly?token=${own.ingest_token}&device=ht-own&temp=3`);
    expect([plain.status, plain.json.accepted]).toEqual([200, 1]);
  });
});
