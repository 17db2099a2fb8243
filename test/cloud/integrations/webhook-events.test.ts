import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  chirpstackEventJson,
  chirpstackEventProtobuf,
  chirpstackStatusJson,
  chirpstackStatusProtobuf,
  chirpstackUpJson,
  chirpstackUpProtobuf,
  ttsUplinkJson,
  type ChirpstackOtherEvent,
} from '../../../hardware/emulators/lorawan-webhook.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite } from '../../helpers/fixtures.ts';

/** Elsys' payload document example: 22.6 °C, 41 %RH, 39 lux, motion 6, 776 ppm CO2, VDD 3426 mV (an ERS CO2). */
const ELSYS = Buffer.from('0100E202290400270506060308070D62', 'hex');
const T0 = Date.UTC(2026, 0, 5, 10, 0, 0);
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', '.000000Z');
const RECORDED: ChirpstackOtherEvent[] = ['ack', 'txack', 'log', 'location', 'integration'];

describe.each(DATABASES)('ChirpStack events, decoders and tokens over the webhooks on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let siteId: string;
  let chirpstack: { id: string; token: string };

  async function start(env: Record<string, string> = {}): Promise<void> {
    t = await startTestCloud({ db, env });
    user = await signUp(t, 'ops@example.com');
    siteId = (await createSite(t, user.token)).id;
    chirpstack = await integration('chirpstack');
  }
  beforeEach(async () => start());
  afterEach(async () => t?.stop());

  async function integration(
    kind: string,
    site = siteId,
    token = user.token,
  ): Promise<{ id: string; token: string }> {
    const answer = await t.http.post('/v1/integrations', { kind, site_id: site, name: kind }, { token });
    if (answer.status !== 201) throw new Error(`${answer.status} ${answer.text}`);
    return { id: answer.json.id, token: answer.json.token };
  }
  const post = (event: string, body: string | Buffer, token = chirpstack.token) =>
    t.http.post(`/v1/webhooks/chirpstack?event=${event}`, undefined, {
      token,
      raw: body,
      headers: { 'content-type': typeof body === 'string' ? 'application/json' : 'application/octet-stream' },
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
      const read = await t.http.get(
        `/v1/channels/${s.channel_id}/measurements?from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z`,
        { token: user.token },
      );
      for (const p of read.json.data) out.push(`${s.kind}/${s.label ?? '-'}@${p.ts}=${p.value}`);
    }
    return out.sort();
  }
  /** The events the integration keeps for the DevEUI: `event@time` (the event's own time). */
  async function recorded(integrationId: string, devEui: string): Promise<string[]> {
    const { integrationsRepository, db: database } = t.cloud.services;
    const rows = await integrationsRepository.lastEvents(database, integrationId, devEui);
    return rows.map((r) => `${r.event}@${(JSON.parse(r.detail) as { time?: number }).time ?? '-'}`);
  }
  const logged = (start: string) => t.logs.filter((l) => String(l.msg).startsWith(start));

  it('answers every event type 200 in JSON and in protobuf, and keeps the last of each per device', async () => {
    for (const [encoding, devEui] of [
      ['json', '0C0C0C0C0C0C0C0C'],
      ['protobuf', '0D0D0D0D0D0D0D0D'],
    ] as const) {
      const json = encoding === 'json';
      const local = devEui.toLowerCase();
      const up = { devEui, time: T0, data: Buffer.alloc(0), object: { temperature: 4.5 } };
      const answers = [
        await post('up', json ? chirpstackUpJson(up) : chirpstackUpProtobuf(up)),
        await post(
          'status',
          json ? chirpstackStatusJson(devEui, 80, T0) : chirpstackStatusProtobuf(devEui, 80, T0),
        ),
      ];
      for (const type of ['join', ...RECORDED] as const) {
        answers.push(
          await post(
            type,
            json ? chirpstackEventJson(type, devEui, T0) : chirpstackEventProtobuf(type, devEui, T0),
          ),
        );
      }
      expect(answers.map((a) => `${encoding} ${a.status}`)).toEqual(Array(8).fill(`${encoding} 200`));
      expect(answers.slice(3).map((a) => a.json)).toEqual(RECORDED.map((type) => ({ recorded: type })));
      const device = await deviceOf(local);
      expect(device).toMatchObject({ online: true, last_seen_at: expect.any(String) });
      expect(await points(device.id)).toEqual([
        `battery/-@${iso(T0)}=80`,
        `signal/-@${iso(T0)}=-97`,
        `temperature/-@${iso(T0)}=4.5`,
      ]);
      const at = T0 * 1000;
      expect(await recorded(chirpstack.id, local)).toEqual(
        ['ack', 'integration', 'join', 'location', 'log', 'status', 'txack'].map((e) => `${e}@${at}`),
      );
    }

    // The events that store nothing create no device, and only the last of a kind is kept.
    for (const type of RECORDED) {
      expect((await post(type, chirpstackEventProtobuf(type, '0E0E0E0E0E0E0E0E', T0))).status).toBe(200);
    }
    expect((await post('log', chirpstackEventJson('log', '0E0E0E0E0E0E0E0E', T0 + 60_000))).status).toBe(200);
    expect(await deviceOf('0e0e0e0e0e0e0e0e')).toBeUndefined();
    expect(await recorded(chirpstack.id, '0e0e0e0e0e0e0e0e')).toEqual([
      `ack@${T0 * 1000}`,
      `integration@${T0 * 1000}`,
      `location@${T0 * 1000}`,
      `log@${(T0 + 60_000) * 1000}`,
      `txack@${T0 * 1000}`,
    ]);
    // A body of another event type, or none at all, is malformed: 400, never 5xx.
    const garbage = await post('integration', Buffer.from('0a02ffff', 'hex'));
    expect([garbage.status, garbage.json.error.code]).toEqual([400, 'invalid_request']);
  });

  it('marks a device seen on a status event without a battery level, and online on a protobuf join', async () => {
    const status = await post('status', chirpstackStatusJson('0F0F0F0F0F0F0F0F', null, T0));
    expect([status.status, status.json.accepted]).toEqual([200, 0]);
    expect(await deviceOf('0f0f0f0f0f0f0f0f')).toMatchObject({
      online: true,
      last_seen_at: expect.any(String),
    });
    const join = await post('join', chirpstackEventProtobuf('join', '1010101010101010', T0));
    expect(join.status).toBe(200);
    expect(await deviceOf('1010101010101010')).toMatchObject({
      model: 'lorawan-generic',
      online: true,
      last_seen_at: expect.any(String),
    });
  });

  it("decodes an Elsys ERS CO2 uplink with the model's decoder: ChirpStack JSON with object null, and The Things Stack", async () => {
    const ers = await createDevice(t, user.token, siteId, {
      local_id: 'a81758fffe0301a1',
      model: 'elsys-ers',
    });
    const body = JSON.parse(
      chirpstackUpJson({ devEui: 'A81758FFFE0301A1', time: T0, fPort: 5, data: ELSYS }),
    );
    body.object = null;
    const answer = await post('up', JSON.stringify(body));
    expect([answer.status, answer.json.accepted]).toEqual([200, 5]);
    expect(await points(ers.id)).toEqual([
      `battery/-@${iso(T0)}=3.426`,
      `co2/-@${iso(T0)}=776`,
      `humidity/-@${iso(T0)}=41`,
      `signal/-@${iso(T0)}=-97`,
      `temperature/-@${iso(T0)}=22.6`,
    ]);

    const ttn = await integration('ttn');
    const viaTts = await createDevice(t, user.token, siteId, {
      local_id: 'a81758fffe0301a2',
      model: 'elsys-ers',
    });
    const tts = await t.http.post('/v1/webhooks/ttn', undefined, {
      token: ttn.token,
      raw: ttsUplinkJson({
        devEui: 'A81758FFFE0301A2',
        fCnt: 12,
        fPort: 5,
        data: ELSYS,
        rx: [{ gatewayId: '0016c001f153a14c', rssi: -88, snr: 9, time: T0 }],
      }),
      headers: { 'content-type': 'application/json' },
    });
    expect([tts.status, tts.json.accepted]).toEqual([200, 5]);
    expect(await points(viaTts.id)).toContain(`co2/-@${iso(T0)}=776`);
  });

  it('stores the extended Cayenne LPP types of our kinds with their channels as labels', async () => {
    const lpp = await createDevice(t, user.token, siteId, {
      local_id: '4000000000000001',
      model: 'cayenne-lpp',
    });
    const data = Buffer.from('037457B8017500ED05800D7A027D030C03670110056700FF', 'hex');
    const answer = await post('up', chirpstackUpProtobuf({ devEui: '4000000000000001', time: T0, data }));
    expect([answer.status, answer.json.accepted]).toEqual([200, 7]);
    expect(await points(lpp.id)).toEqual([
      `co2/2@${iso(T0)}=780`,
      `current/1@${iso(T0)}=0.237`,
      `power/5@${iso(T0)}=3450`,
      `signal/-@${iso(T0)}=-97`,
      `temperature/3@${iso(T0)}=27.2`,
      `temperature/5@${iso(T0)}=25.5`,
      `voltage/3@${iso(T0)}=224.56`,
    ]);
  });

  it('stores an uplink that carries no time at all at its receive time', async () => {
    const before = Date.now();
    const answer = await post(
      'up',
      chirpstackUpJson({
        devEui: '1111111111111111',
        time: null,
        data: Buffer.alloc(0),
        object: { co2: 640 },
      }),
    );
    const after = Date.now();
    expect([answer.status, answer.json.accepted]).toEqual([200, 2]);
    const device = await deviceOf('1111111111111111');
    for (const p of await points(device.id)) {
      const ts = Date.parse(p.split('@')[1]!.split('=')[0]!);
      expect(ts).toBeGreaterThanOrEqual(before - 1000);
      expect(ts).toBeLessThanOrEqual(after + 1000);
    }
  });

  it('stores an uplink whose network time is older than RETENTION_DAYS keeps at its receive time, not to remove it', async () => {
    await t.stop();
    await start({ RETENTION_DAYS: '30' });
    const before = Date.now();
    const answer = await post(
      'up',
      chirpstackUpJson({
        devEui: '1111111111111112',
        time: before - 40 * 86_400_000,
        data: Buffer.alloc(0),
        object: { co2: 640 },
      }),
    );
    expect([answer.status, answer.json.accepted]).toEqual([200, 2]);
    const device = await deviceOf('1111111111111112');
    for (const p of await points(device.id)) {
      expect(Date.parse(p.split('@')[1]!.split('=')[0]!)).toBeGreaterThanOrEqual(before - 1000);
    }
    expect(await t.cloud.services.retention.run()).toMatchObject({ deleted: 0 });
  });

  it('stores the first 31 values of an uplink that carries more, and names the rest in the log', async () => {
    const temperatureSensor = Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [String(i + 1), 20 + i / 10]),
    );
    const answer = await post(
      'up',
      chirpstackUpJson({
        devEui: '1111111111111113',
        time: T0,
        data: Buffer.alloc(0),
        object: { temperatureSensor },
      }),
    );
    expect([answer.status, answer.json.accepted]).toEqual([200, 32]); // 31 values and the signal
    const line = t.logs.find((l) => l.dev_eui === '1111111111111113' && l.level === 40);
    expect(line).toMatchObject({ kept: 31, not_stored: expect.arrayContaining(['temperature/40']) });
    expect((line!.not_stored as string[]).length).toBe(9);
  });

  it('answers 200 and logs, never 5xx, for payloads no decoder can read and values it cannot store', async () => {
    const cases: [string, string, Buffer, Record<string, unknown> | undefined][] = [
      ['cayenne-lpp', '2000000000000001', Buffer.from('FFFE', 'hex'), undefined],
      ['dragino-lht65', '2000000000000002', Buffer.from('CBF60B0D03', 'hex'), undefined],
      ['elsys-ers', '2000000000000003', Buffer.from('7F01', 'hex'), undefined],
      ['lorawan-generic', '2000000000000004', Buffer.from('0102', 'hex'), undefined],
      ['lorawan-generic', '2000000000000005', Buffer.alloc(0), { temperature: 900, humidity: 'wet' }],
      ['lorawan-generic', '2000000000000006', Buffer.alloc(0), { temperatureSensor: { 'a\u0000b': 5 } }],
    ];
    for (const [model, devEui, data, object] of cases) {
      await createDevice(t, user.token, siteId, { local_id: devEui, model });
      const body = chirpstackUpJson({ devEui, time: T0, data, ...(object ? { object } : {}) });
      for (const answer of [
        await post('up', body),
        await post(
          'up',
          chirpstackUpProtobuf({ devEui, time: T0 + 1000, data, ...(object ? { object } : {}) }),
        ),
      ]) {
        expect([model, devEui, answer.status]).toEqual([model, devEui, 200]);
        expect(answer.json.channels.map((c: { type: string }) => c.type)).toEqual(['signal']);
      }
    }
    expect(logged('uplink payload not decoded').length).toBeGreaterThanOrEqual(8);
    expect(logged('uplink values outside their sanity range dropped').length).toBeGreaterThanOrEqual(2);
  });

  it('reports a decoded field of no known meaning once per device', async () => {
    const up = (devEui: string, mode: string) =>
      post(
        'up',
        chirpstackUpJson({ devEui, data: Buffer.alloc(0), object: { temperature: 5, workMode: mode } }),
      );
    expect((await up('3000000000000001', 'a')).json.accepted).toBe(2);
    await up('3000000000000001', 'b');
    await up('3000000000000001', 'c');
    await up('3000000000000002', 'a');
    const reports = logged('decoded fields without a known meaning');
    expect(reports.map((l) => [l.dev_eui, l.fields])).toEqual([
      ['3000000000000001', ['workMode']],
      ['3000000000000002', ['workMode']],
    ]);
  });

  it("keeps another account's devices out of reach of a Shelly integration token", async () => {
    const mine = await createDevice(t, user.token, siteId, { local_id: 'ht-hall', model: 'shelly-ht-gen1' });
    const b = await signUp(t, 'b@example.com');
    const bSite = (await createSite(t, b.token)).id;
    const bShelly = await integration('shelly', bSite, b.token);
    const answer = await t.http.get(`/v1/ingest/shelly?token=${bShelly.token}&device=ht-hall&temp=4.5`);
    expect([answer.status, answer.json.accepted]).toEqual([200, 1]);
    expect(await deviceOf('ht-hall', bSite, b.token)).toBeDefined();
    expect(await points(mine.id)).toEqual([]);
    const dev = await t.http.get(`/v1/ingest/shelly?token=${bShelly.token}&device=${mine.id}&temp=4.5`);
    expect(dev.status).toBe(200);
    expect(await points(mine.id)).toEqual([]);
  });
});
