import { afterEach, describe, expect, it } from '@jest/globals';
import { ApiError } from '../../../cloud/src/errors.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { auditOf, createDevice, createSite } from '../../helpers/fixtures.ts';

const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;
const BASE_URL = 'https://monitor.example.com';

/** Every supported model of docs/api/resources.md, with its vendor, URL kind and identify support. */
const MODELS = [
  {
    model: 'shelly-ht-gen1',
    name: 'Shelly H&T (1st generation)',
    vendor: 'Shelly',
    ingest_url_kind: 'shelly_get',
    identify: false,
  },
  {
    model: 'shelly-plus-ht',
    name: 'Shelly Plus H&T',
    vendor: 'Shelly',
    ingest_url_kind: 'mqtt',
    identify: false,
  },
  {
    model: 'shelly-ht-gen3',
    name: 'Shelly H&T Gen3',
    vendor: 'Shelly',
    ingest_url_kind: 'shelly_get',
    identify: false,
  },
  {
    model: 'shelly-plus-1pm',
    name: 'Shelly Plus 1PM',
    vendor: 'Shelly',
    ingest_url_kind: 'mqtt',
    identify: true,
  },
  {
    model: 'lorawan-generic',
    name: 'LoRaWAN sensor (any)',
    vendor: 'LoRaWAN',
    ingest_url_kind: 'lorawan',
    identify: false,
  },
  {
    model: 'dragino-lht65',
    name: 'Dragino LHT65',
    vendor: 'Dragino',
    ingest_url_kind: 'lorawan',
    identify: false,
  },
  { model: 'elsys-ers', name: 'Elsys ERS', vendor: 'Elsys', ingest_url_kind: 'lorawan', identify: false },
  {
    model: 'cayenne-lpp',
    name: 'Sensor sending Cayenne LPP',
    vendor: 'myDevices',
    ingest_url_kind: 'lorawan',
    identify: false,
  },
  {
    model: 'serial-generic',
    name: 'Serial sensor on a gateway',
    vendor: 'Generic',
    ingest_url_kind: 'mqtt',
    identify: false,
  },
  {
    model: 'http-generic',
    name: 'Any device posting over HTTPS',
    vendor: 'Generic',
    ingest_url_kind: 'https_post',
    identify: false,
  },
  {
    model: 'mqtt-generic',
    name: 'Any device publishing over MQTT',
    vendor: 'Generic',
    ingest_url_kind: 'mqtt',
    identify: true,
  },
  {
    model: 'gateway-pi',
    name: 'Raspberry Pi gateway',
    vendor: 'Raspberry Pi',
    ingest_url_kind: 'mqtt',
    identify: true,
  },
];

/** The complete Shelly GET URL a user pastes into the device (docs/api/resources.md). */
function shellyUrl(token: string, localId: string): string {
  return (
    `${BASE_URL}/v1/ingest/shelly?token=${token}&device=${encodeURIComponent(localId)}` +
    '&temp=$temperature&hum=$humidity&battery=$bat&signal=$rssi'
  );
}

describe.each(DATABASES)('devices on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let siteId: string;
  afterEach(async () => t?.stop());

  async function start(): Promise<void> {
    t = await startTestCloud({ db, env: { BASE_URL: `${BASE_URL}/` } });
    user = await signUp(t, 'owner@example.com');
    siteId = (await createSite(t, user.token)).id;
  }

  async function list(query: string) {
    const answer = await t.http.get(`/v1/devices?${query}`, { token: user.token });
    expect(answer.status).toBe(200);
    return answer.json.data.map((d: { id: string }) => d.id);
  }

  /** What the ingest endpoints will do with a device token: the principal, or the error code. */
  async function ingestAuth(token: string): Promise<string> {
    try {
      return (await t.cloud.services.authenticator.device(token)).deviceId;
    } catch (err) {
      if (err instanceof ApiError) return `${err.status} ${err.code}`;
      throw err;
    }
  }

  it('lists every supported model with its name, vendor, ingest_url_kind and identify', async () => {
    await start();
    const answer = await t.http.get('/v1/models', { token: user.token });
    expect(answer.status).toBe(200);
    expect(answer.json).toEqual({ data: MODELS });
  });

  it('creates an HTTP device: 201 with its token once and the ingest endpoint', async () => {
    await start();
    const answer = await t.http.post(
      '/v1/devices',
      { site_id: siteId, local_id: 'fridge-1', name: 'Fridge', model: 'http-generic' },
      { token: user.token },
    );
    expect(answer.status).toBe(201);
    expect(answer.json).toMatchObject({
      id: expect.stringMatching(/^dev_[0-9A-Za-z]{20,}$/),
      local_id: 'fridge-1',
      ingest_token: expect.stringMatching(/^ds_live_[0-9A-Za-z]{43,}$/),
      ingest_url: `${BASE_URL}/v1/ingest`,
      issued_at: expect.stringMatching(TIMESTAMP),
    });
    const got = await t.http.get(`/v1/devices/${answer.json.id}`, { token: user.token });
    expect(got.status).toBe(200);
    expect(got.json).toEqual({
      id: answer.json.id,
      site_id: siteId,
      local_id: 'fridge-1',
      name: 'Fridge',
      notes: '',
      model: 'http-generic',
      fw_version: null,
      ingest_url_kind: 'https_post',
      last_seen_at: null,
      online: false,
      created_at: expect.stringMatching(TIMESTAMP),
      public: null,
    });
    // the plaintext is answered once: reading the device never shows it again
    expect(got.text).not.toContain(answer.json.ingest_token);
    expect(await ingestAuth(answer.json.ingest_token)).toBe(answer.json.id);
    expect(await auditOf(t, user.token, 'device.created')).toEqual([
      expect.objectContaining({ by: user.userId, target: answer.json.id }),
    ]);
  });

  it('answers a Shelly H&T gen1 with the complete GET URL, token and device included', async () => {
    await start();
    const device = await createDevice(t, user.token, siteId, {
      local_id: 'ht-1/a&b',
      model: 'shelly-ht-gen1',
    });
    expect(device.ingest_url).toBe(shellyUrl(device.ingest_token, 'ht-1/a&b'));
    const got = await t.http.get(`/v1/devices/${device.id}`, { token: user.token });
    expect(got.json.ingest_url_kind).toBe('shelly_get');
  });

  it('refuses a second device with the same local_id on the site with 409 local_id_taken', async () => {
    await start();
    await createDevice(t, user.token, siteId, { local_id: 'fridge-1' });
    const answer = await t.http.post(
      '/v1/devices',
      { site_id: siteId, local_id: 'fridge-1', name: 'Other', model: 'http-generic' },
      { token: user.token },
    );
    expect(answer.status).toBe(409);
    expect(answer.json.error.code).toBe('local_id_taken');
    expect(await list(`site_id=${siteId}`)).toHaveLength(1);
  });

  it('allows the same local_id on another site, and again once the first device is deleted', async () => {
    await start();
    const other = await createSite(t, user.token, { name: 'Bar' });
    const first = await createDevice(t, user.token, siteId, { local_id: 'fridge-1' });
    await createDevice(t, user.token, other.id, { local_id: 'fridge-1' });
    expect((await t.http.delete(`/v1/devices/${first.id}`, { token: user.token })).status).toBe(204);
    await createDevice(t, user.token, siteId, { local_id: 'fridge-1' });
  });

  it('refuses an unknown model with 422 unknown_model', async () => {
    await start();
    const answer = await t.http.post(
      '/v1/devices',
      { site_id: siteId, local_id: 'x', name: 'X', model: 'toaster-3000' },
      { token: user.token },
    );
    expect(answer.status).toBe(422);
    expect(answer.json.error.code).toBe('unknown_model');
  });

  it("answers 404 site_not_found for another account's site, whatever else is wrong", async () => {
    await start();
    const other = await signUp(t, 'other@example.com');
    for (const body of [
      { site_id: siteId, local_id: 'x', name: 'X', model: 'http-generic' },
      { site_id: siteId, local_id: '', model: 'toaster' },
    ]) {
      const answer = await t.http.post('/v1/devices', body, { token: other.token });
      expect(answer.status).toBe(404);
      expect(answer.json.error.code).toBe('site_not_found');
    }
    expect(await list(`site_id=${siteId}`)).toEqual([]);
  });

  it('refuses a device without the required fields with 400 invalid_request and details', async () => {
    await start();
    const answer = await t.http.post('/v1/devices', { site_id: siteId }, { token: user.token });
    expect(answer.status).toBe(400);
    expect(answer.json.error.code).toBe('invalid_request');
    expect(answer.json.error.details.map((d: { path: string }) => d.path).sort()).toEqual([
      'local_id',
      'model',
      'name',
    ]);
  });

  it('lists by site_id, by account_id (own id or me), and filters by online', async () => {
    await start();
    const other = await createSite(t, user.token, { name: 'Bar' });
    const a = await createDevice(t, user.token, siteId);
    const b = await createDevice(t, user.token, siteId);
    const c = await createDevice(t, user.token, other.id);
    // only an uplink sets a device online; the ingest feature is not here yet, so set it as ingest would
    await t.cloud.services.db.updateTable('devices').set({ online: 1 }).where('id', '=', b.id).execute();

    expect(await list(`site_id=${siteId}`)).toEqual([a.id, b.id]);
    expect(await list(`site_id=${other.id}`)).toEqual([c.id]);
    expect(await list(`account_id=${user.accountId}`)).toEqual([a.id, b.id, c.id]);
    expect(await list('account_id=me')).toEqual([a.id, b.id, c.id]);
    expect(await list(`account_id=${user.accountId}&online=true`)).toEqual([b.id]);
    expect(await list(`account_id=${user.accountId}&online=false`)).toEqual([a.id, c.id]);
    expect(await list(`site_id=${siteId}&online=false`)).toEqual([a.id]);
    const online = await t.http.get(`/v1/devices?site_id=${siteId}`, { token: user.token });
    expect(online.json.data.map((d: { online: boolean }) => d.online)).toEqual([false, true]);
  });

  it('filters by model substring, case-insensitively, with % and _ taken literally', async () => {
    await start();
    const gen1 = await createDevice(t, user.token, siteId, { model: 'shelly-ht-gen1' });
    const gen3 = await createDevice(t, user.token, siteId, { model: 'shelly-ht-gen3' });
    const http = await createDevice(t, user.token, siteId, { model: 'http-generic' });
    const q = (model: string) => list(`site_id=${siteId}&model=${encodeURIComponent(model)}`);
    expect(await q('shelly')).toEqual([gen1.id, gen3.id]);
    expect(await q('SHELLY-HT-GEN1')).toEqual([gen1.id]);
    expect(await q('generic')).toEqual([http.id]);
    expect(await q('ht-gen')).toEqual([gen1.id, gen3.id]);
    // a wildcard in the filter matches only itself: no model has a % or an _ in its name
    expect(await q('ht_gen')).toEqual([]);
    expect(await q('shelly%gen')).toEqual([]);
    expect(await q('%')).toEqual([]);
    expect(await q('_')).toEqual([]);
    expect(await q('\\')).toEqual([]);
  });

  it('pages the device list with a cursor', async () => {
    await start();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await createDevice(t, user.token, siteId)).id);
    const first = await t.http.get(`/v1/devices?site_id=${siteId}&limit=2`, { token: user.token });
    expect(first.json).toMatchObject({ has_more: true, next_cursor: expect.any(String) });
    const seen = first.json.data.map((d: { id: string }) => d.id);
    let cursor = first.json.next_cursor;
    while (cursor) {
      const page = await t.http.get(`/v1/devices?site_id=${siteId}&limit=2&cursor=${cursor}`, {
        token: user.token,
      });
      seen.push(...page.json.data.map((d: { id: string }) => d.id));
      cursor = page.json.next_cursor;
    }
    expect(seen).toEqual(ids);
  });

  it('needs site_id or account_id: 400 invalid_request without either', async () => {
    await start();
    const answer = await t.http.get('/v1/devices', { token: user.token });
    expect(answer.status).toBe(400);
    expect(answer.json.error.code).toBe('invalid_request');
    expect(answer.json.error.details[0].path).toBe('site_id');
  });

  it('answers 404 for a list filtered by a foreign or unknown site_id or account_id', async () => {
    await start();
    const other = await signUp(t, 'other@example.com');
    const cases: [string, string][] = [
      [`site_id=${siteId}`, 'site_not_found'],
      ['site_id=site_unknown', 'site_not_found'],
      [`account_id=${user.accountId}`, 'account_not_found'],
      ['account_id=acc_unknown', 'account_not_found'],
    ];
    for (const [query, code] of cases) {
      const answer = await t.http.get(`/v1/devices?${query}`, { token: other.token });
      expect([query, answer.status, answer.json.error.code]).toEqual([query, 404, code]);
    }
  });

  it('changes name, local_id and notes', async () => {
    await start();
    const device = await createDevice(t, user.token, siteId, { local_id: 'old' });
    const answer = await t.http.patch(
      `/v1/devices/${device.id}`,
      { name: 'Walk-in freezer', local_id: 'new', notes: 'behind the door' },
      { token: user.token },
    );
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({ name: 'Walk-in freezer', local_id: 'new', notes: 'behind the door' });
    expect((await t.http.get(`/v1/devices/${device.id}`, { token: user.token })).json).toEqual(answer.json);
    expect(await auditOf(t, user.token, 'device.updated')).toEqual([
      expect.objectContaining({
        target: device.id,
        details: {
          before: { name: 'Fridge', local_id: 'old', notes: '' },
          after: { name: 'Walk-in freezer', local_id: 'new', notes: 'behind the door' },
        },
      }),
    ]);
  });

  it('refuses a local_id that another device of the site has with 409 local_id_taken', async () => {
    await start();
    await createDevice(t, user.token, siteId, { local_id: 'taken' });
    const device = await createDevice(t, user.token, siteId, { local_id: 'mine' });
    const answer = await t.http.patch(
      `/v1/devices/${device.id}`,
      { local_id: 'taken' },
      { token: user.token },
    );
    expect(answer.status).toBe(409);
    expect(answer.json.error.code).toBe('local_id_taken');
    expect((await t.http.get(`/v1/devices/${device.id}`, { token: user.token })).json.local_id).toBe('mine');
    // keeping its own local_id is no clash
    const same = await t.http.patch(`/v1/devices/${device.id}`, { local_id: 'mine' }, { token: user.token });
    expect(same.status).toBe(200);
  });

  it.each([
    ['model', { model: 'shelly-ht-gen1' }],
    ['site_id', { site_id: 'site_elsewhere' }],
    ['model next to a valid field', { name: 'Renamed', model: 'shelly-ht-gen1' }],
  ])('refuses a PATCH of %s with 400 invalid_request and changes nothing', async (_what, body) => {
    await start();
    const device = await createDevice(t, user.token, siteId);
    const before = (await t.http.get(`/v1/devices/${device.id}`, { token: user.token })).json;
    const answer = await t.http.patch(`/v1/devices/${device.id}`, body, { token: user.token });
    expect(answer.status).toBe(400);
    expect(answer.json.error.code).toBe('invalid_request');
    expect((await t.http.get(`/v1/devices/${device.id}`, { token: user.token })).json).toEqual(before);
  });

  it('deletes a device: 204, then 404 device_not_found, gone from lists, its token refused', async () => {
    await start();
    const device = await createDevice(t, user.token, siteId);
    const kept = await createDevice(t, user.token, siteId);
    const answer = await t.http.delete(`/v1/devices/${device.id}`, { token: user.token });
    expect(answer.status).toBe(204);
    for (const after of [
      await t.http.get(`/v1/devices/${device.id}`, { token: user.token }),
      await t.http.patch(`/v1/devices/${device.id}`, { name: 'x' }, { token: user.token }),
      await t.http.delete(`/v1/devices/${device.id}`, { token: user.token }),
      await t.http.post(`/v1/devices/${device.id}/rotate-token`, undefined, { token: user.token }),
    ]) {
      expect(after.status).toBe(404);
      expect(after.json.error.code).toBe('device_not_found');
    }
    expect(await list(`site_id=${siteId}`)).toEqual([kept.id]);
    expect(await list('account_id=me')).toEqual([kept.id]);
    expect(await ingestAuth(device.ingest_token)).toBe('401 token_invalid');
    expect(await ingestAuth(kept.ingest_token)).toBe(kept.id);
    expect(await auditOf(t, user.token, 'device.deleted')).toEqual([
      expect.objectContaining({ target: device.id }),
    ]);
  });

  it('rotates the token: a new one once, the old one refused at once, the Shelly URL changes', async () => {
    await start();
    const device = await createDevice(t, user.token, siteId, { local_id: 'ht-1', model: 'shelly-ht-gen1' });
    const answer = await t.http.post(`/v1/devices/${device.id}/rotate-token`, undefined, {
      token: user.token,
    });
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({
      id: device.id,
      local_id: 'ht-1',
      ingest_token: expect.stringMatching(/^ds_live_/),
      issued_at: expect.stringMatching(TIMESTAMP),
    });
    expect(answer.json.ingest_token).not.toBe(device.ingest_token);
    expect(answer.json.ingest_url).toBe(shellyUrl(answer.json.ingest_token, 'ht-1'));
    expect(answer.json.ingest_url).not.toBe(device.ingest_url);

    expect(await ingestAuth(device.ingest_token)).toBe('401 token_invalid');
    expect(await ingestAuth(answer.json.ingest_token)).toBe(device.id);
    expect(await auditOf(t, user.token, 'device.token_rotated')).toEqual([
      expect.objectContaining({ by: user.userId, target: device.id }),
    ]);
  });

  it('answers 404 device_not_found for an unknown device on every device route', async () => {
    await start();
    for (const answer of [
      await t.http.get('/v1/devices/dev_unknown', { token: user.token }),
      await t.http.patch('/v1/devices/dev_unknown', { name: 'x' }, { token: user.token }),
      await t.http.delete('/v1/devices/dev_unknown', { token: user.token }),
      await t.http.post('/v1/devices/dev_unknown/rotate-token', undefined, { token: user.token }),
      await t.http.get('/v1/devices/dev_unknown/sensors', { token: user.token }),
    ]) {
      expect(answer.status).toBe(404);
      expect(answer.json.error.code).toBe('device_not_found');
    }
  });
});
