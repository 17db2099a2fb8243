import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite, shellyActionUrl, type CreatedDevice } from '../../helpers/fixtures.ts';

describe.each(DATABASES)('GET /v1/ingest/shelly on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let siteId: string;
  let gen1: CreatedDevice;

  beforeEach(async () => {
    t = await startTestCloud({ db });
    user = await signUp(t, 'ops@example.com');
    siteId = (await createSite(t, user.token, { vertical: 'food_service' })).id;
    gen1 = await createDevice(t, user.token, siteId, { local_id: 'ht-1', model: 'shelly-ht-gen1' });
  });
  afterEach(async () => t?.stop());

  const shelly = (query: string, token: string | null = gen1.ingest_token) =>
    t.http.get(`/v1/ingest/shelly?${token ? `token=${token}&` : ''}${query}`);
  const sensors = async (device: CreatedDevice) =>
    Object.fromEntries(
      (await t.http.get(`/v1/devices/${device.id}/sensors`, { token: user.token })).json.data.map(
        (s: any) => [s.kind, s],
      ),
    );

  it('works with the ingest_url the device was given, template values substituted', async () => {
    const url = shellyActionUrl(gen1, 3.75);
    expect(url.pathname).toBe('/v1/ingest/shelly');
    const answer = await t.http.get(url.pathname + url.search);
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({ accepted: 4, deduplicated: 0 });
    expect(answer.json.channels.map((c: any) => c.type)).toEqual([
      'temperature',
      'humidity',
      'signal',
      'battery',
    ]);
    const s = await sensors(gen1);
    expect(s.temperature).toMatchObject({ last_value: 3.75, unit: '°C', ok_min: 0, ok_max: 5 });
    expect(s.humidity).toMatchObject({ last_value: 61, unit: '%' });
    expect(s.signal).toMatchObject({ last_value: -67, unit: 'dBm' });
    expect(s.battery).toMatchObject({ last_value: 87, unit: '%' });
    expect(answer.headers.get('x-ratelimit-device')).toBe('60');
  });

  it('drops nan, null, empty and unexpanded template values silently and stores the rest', async () => {
    for (const [i, hum] of ['nan', 'null', '', '$humidity', '${ev.rh}', 'NaN'].entries()) {
      const answer = await shelly(
        `device=ht-1&temp=4.${i}&hum=${encodeURIComponent(hum)}&ts=2026-01-05T10:0${i}:00Z`,
      );
      expect([hum, answer.status, answer.json.accepted]).toEqual([hum, 200, 1]);
    }
    expect(Object.keys(await sensors(gen1))).toEqual(['temperature']);
  });

  it('answers 400 no_measurements when neither temp nor hum is usable', async () => {
    for (const query of [
      'device=ht-1',
      'device=ht-1&temp=nan&hum=null',
      'device=ht-1&temp=$temperature&battery=90',
    ]) {
      const answer = await shelly(query);
      expect([query, answer.status, answer.json.error.code]).toEqual([query, 400, 'no_measurements']);
    }
  });

  it('reads battery as percent on gen1, as volts at 6 or less, and as volts on third-generation models', async () => {
    await shelly('device=ht-1&temp=4&battery=5.5&ts=2026-01-05T10:00:00Z');
    expect((await sensors(gen1)).battery).toMatchObject({ unit: 'V', last_value: 5.5 });
    const gen3 = await createDevice(t, user.token, siteId, { local_id: 'ht-3', model: 'shelly-ht-gen3' });
    const answer = await shelly('device=ht-3&hum=50&battery=7.5', gen3.ingest_token);
    expect(answer.status).toBe(200);
    expect((await sensors(gen3)).battery).toMatchObject({ unit: 'V', last_value: 7.5, ok_min: 3 });
    const pct = await createDevice(t, user.token, siteId, { local_id: 'ht-p', model: 'shelly-ht-gen1' });
    await shelly('device=ht-p&hum=50&battery=64', pct.ingest_token);
    expect((await sensors(pct)).battery).toMatchObject({ unit: '%', last_value: 64 });
  });

  it('flips the device offline and online with lwt, accepting no values', async () => {
    await shelly('device=ht-1&temp=4');
    const offline = await shelly('device=ht-1&lwt=offline');
    expect(offline.status).toBe(200);
    expect(offline.json).toEqual({ accepted: 0, deduplicated: 0, channels: [] });
    expect((await t.http.get(`/v1/devices/${gen1.id}`, { token: user.token })).json.online).toBe(false);
    await shelly('device=ht-1&lwt=online');
    expect((await t.http.get(`/v1/devices/${gen1.id}`, { token: user.token })).json.online).toBe(true);
    const bad = await shelly('device=ht-1&lwt=sleeping');
    expect([bad.status, bad.json.error.code]).toEqual([400, 'invalid_request']);
  });

  it('answers with the same errors as POST /v1/ingest', async () => {
    const hot = await shelly('device=ht-1&temp=250');
    expect([hot.status, hot.json.error.code]).toEqual([422, 'out_of_range']);
    const other = await shelly('device=ht-2&temp=4');
    expect([other.status, other.json.error.code]).toEqual([403, 'device_not_in_token']);
    const noToken = await shelly('device=ht-1&temp=4', null);
    expect([noToken.status, noToken.json.error.code]).toEqual([401, 'token_invalid']);
    const wrong = await shelly('device=ht-1&temp=4', 'ds_live_nope');
    expect([wrong.status, wrong.json.error.code]).toEqual([401, 'token_invalid']);
    const noDevice = await shelly('temp=4');
    expect([noDevice.status, noDevice.json.error.code]).toEqual([400, 'invalid_request']);
    const badTs = await shelly('device=ht-1&temp=4&ts=2026-01-05');
    expect([badTs.status, badTs.json.error.code]).toEqual([400, 'invalid_request']);
    // a header token works too
    const header = await t.http.get('/v1/ingest/shelly?device=ht-1&temp=4', { token: gen1.ingest_token });
    expect(header.status).toBe(200);
  });

  it('never writes the token value to any log line', async () => {
    await shelly('device=ht-1&temp=4');
    await shelly('device=ht-1&temp=900');
    await shelly('device=ht-2&temp=4');
    await t.http.get(
      `/v1/ingest/shelly?device=ht-1&temp=4&token=${gen1.ingest_token}&token=${gen1.ingest_token}`,
    );
    const secret = gen1.ingest_token.slice('ds_live_'.length);
    const text = JSON.stringify(t.logs);
    expect(t.logs.filter((l) => String(l.url).startsWith('/v1/ingest/shelly')).length).toBeGreaterThanOrEqual(
      4,
    );
    expect(text).not.toContain(secret);
    expect(text).toContain('token=[redacted]');
  });

  it('redacts the token however its key is spelled, and any value that is a secret by its prefix', async () => {
    // `%74oken` is `token` once decoded: it authenticates, so it must not be logged either.
    const encoded = await t.http.get(`/v1/ingest/shelly?%74oken=${gen1.ingest_token}&device=ht-1&temp=4`);
    expect(encoded.status).toBe(200);
    await t.http.get(`/v1/ingest/shelly?TOKEN=${encodeURIComponent(gen1.ingest_token)}&device=ht-1&temp=4`);
    await t.http.get(`/v1/sites?note=${gen1.ingest_token}`);
    await t.http.get('/app/auth/callback?t=abcdefghijklmnopqrstuvwxyz012345&code=ABC-DEF');
    const text = JSON.stringify(t.logs);
    expect(text).not.toContain(gen1.ingest_token.slice('ds_live_'.length));
    expect(text).not.toContain('abcdefghijklmnopqrstuvwxyz012345');
    expect(text).not.toContain('ABC-DEF');
    expect(text).toContain('%74oken=[redacted]');
    expect(text).toContain('note=[redacted]');
  });
});
