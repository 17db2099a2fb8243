import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { chirpstackUpJson } from '../../../hardware/emulators/lorawan-webhook.ts';
import { auditOf, createSite } from '../../helpers/fixtures.ts';

describe.each(DATABASES)('/v1/integrations on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let siteId: string;

  beforeEach(async () => {
    t = await startTestCloud({ db });
    user = await signUp(t, 'ops@example.com');
    siteId = (await createSite(t, user.token)).id;
  });
  afterEach(async () => t?.stop());

  /** BASE_URL as the cloud names itself (derived from the port it listens on). */
  const base = () => t.url.replace('127.0.0.1', 'localhost');
  const create = (body: Record<string, unknown> = {}, token = user.token) =>
    t.http.post(
      '/v1/integrations',
      { kind: 'chirpstack', site_id: siteId, name: 'LoRaWAN', ...body },
      { token },
    );
  const uplink = (token: string) =>
    t.http.post('/v1/webhooks/chirpstack?event=join', undefined, {
      token,
      headers: { 'content-type': 'application/json' },
      raw: JSON.stringify({ deduplicationId: 'x', deviceInfo: { devEui: '0101010101010101' } }),
    });

  it('answers the token and the URL to paste once, and lists without the token', async () => {
    const answer = await create();
    expect(answer.status).toBe(201);
    expect(answer.headers.get('cache-control')).toBe('no-store');
    expect(answer.json).toEqual({
      id: expect.stringMatching(/^int_[0-9A-Za-z]{22}$/),
      kind: 'chirpstack',
      site_id: siteId,
      name: 'LoRaWAN',
      model: 'lorawan-generic',
      token: expect.stringMatching(/^whk_[0-9A-Za-z]{43}$/),
      url: `${base()}/v1/webhooks/chirpstack`,
      created_at: expect.any(String),
      token_issued_at: expect.any(String),
      last_used_at: null,
    });
    const { token, ...view } = answer.json;
    const ttn = await create({ kind: 'ttn', name: 'TTS' });
    expect(ttn.json.url).toBe(`${base()}/v1/webhooks/ttn`);
    const shelly = await create({ kind: 'shelly', name: 'H&T' });
    expect(shelly.json.url).toBe(`${base()}/v1/ingest/shelly?token=${shelly.json.token}`);

    const list = await t.http.get('/v1/integrations', { token: user.token });
    expect(list.status).toBe(200);
    expect(list.json.data.map((i: { id: string }) => i.id)).toEqual([view.id, ttn.json.id, shelly.json.id]);
    expect(list.text).not.toContain(token);
    expect(list.json.data[2].url).toBe(`${base()}/v1/ingest/shelly?token=<token>`);
    const one = await t.http.get(`/v1/integrations/${view.id}`, { token: user.token });
    expect(one.json).toEqual(view);
    expect((await auditOf(t, user.token, 'integration.created')).map((e) => e.target)).toHaveLength(3);
    expect((await uplink(token)).status).toBe(200);
    expect(
      (await t.http.get(`/v1/integrations/${view.id}`, { token: user.token })).json.last_used_at,
    ).toEqual(expect.any(String));
  });

  it('refuses a deleted integration token at once, and a rotated one at once', async () => {
    const a = (await create()).json;
    const rotated = await t.http.post(`/v1/integrations/${a.id}/rotate-token`, undefined, {
      token: user.token,
    });
    expect(rotated.status).toBe(200);
    expect(rotated.json.token).toMatch(/^whk_/);
    expect(rotated.json.token).not.toBe(a.token);
    expect((await uplink(a.token)).json.error.code).toBe('token_invalid');
    expect((await uplink(rotated.json.token)).status).toBe(200);
    expect((await t.http.delete(`/v1/integrations/${a.id}`, { token: user.token })).status).toBe(204);
    const after = await uplink(rotated.json.token);
    expect([after.status, after.json.error.code]).toEqual([401, 'token_invalid']);
    expect((await t.http.get(`/v1/integrations/${a.id}`, { token: user.token })).json.error.code).toBe(
      'integration_not_found',
    );
    expect((await auditOf(t, user.token, 'integration.token_rotated')).map((e) => e.target)).toEqual([a.id]);
    expect((await auditOf(t, user.token, 'integration.deleted')).map((e) => e.target)).toEqual([a.id]);
  });

  it('needs the admin scope to create, rotate and delete, and refuses bad bodies', async () => {
    const write = (await t.http.post('/v1/tokens', { label: 'w', scope: 'write' }, { token: user.token }))
      .json.token;
    expect((await create({}, write)).json.error.code).toBe('forbidden');
    expect((await create({ kind: 'mqtt' })).json.error.code).toBe('invalid_request');
    expect((await create({ site_id: 'site_nope' })).json.error.code).toBe('site_not_found');
    expect((await create({ token: 'x' })).status).toBe(400);
    const a = (await create()).json;
    for (const answer of [
      await t.http.post(`/v1/integrations/${a.id}/rotate-token`, undefined, { token: write }),
      await t.http.delete(`/v1/integrations/${a.id}`, { token: write }),
    ])
      expect([answer.status, answer.json.error.code]).toEqual([403, 'forbidden']);
    expect((await uplink(a.token)).status).toBe(200);
    const read = (await t.http.post('/v1/tokens', { label: 'r', scope: 'read' }, { token: user.token })).json
      .token;
    expect((await t.http.get(`/v1/integrations/${a.id}`, { token: read })).status).toBe(200);
    // an integration token is not a management credential
    const managed = await t.http.get('/v1/integrations', { token: a.token });
    expect([managed.status, managed.json.error.code]).toEqual([403, 'forbidden']);
  });

  it('gives the devices it creates its model, which must suit its kind', async () => {
    const lht = await create({ model: 'dragino-lht65' });
    expect([lht.status, lht.json.model]).toEqual([201, 'dragino-lht65']);
    expect((await t.http.get(`/v1/integrations/${lht.json.id}`, { token: user.token })).json.model).toBe(
      'dragino-lht65',
    );
    expect((await auditOf(t, user.token, 'integration.created'))[0]!.details).toMatchObject({
      model: 'dragino-lht65',
    });
    // An unknown DevEUI without a decoded object: created as a Dragino LHT65 and decoded as one.
    const up = await t.http.post('/v1/webhooks/chirpstack?event=up', undefined, {
      token: lht.json.token,
      headers: { 'content-type': 'application/json' },
      raw: chirpstackUpJson({
        devEui: 'A840410000000009',
        fPort: 2,
        data: Buffer.from('CBF60B0D0376010ADD7FFF', 'hex'),
      }),
    });
    expect([up.status, up.json.accepted]).toEqual([200, 5]);
    const gen3 = await create({ kind: 'shelly', model: 'shelly-ht-gen3' });
    expect(gen3.json.model).toBe('shelly-ht-gen3');
    const shelly = await t.http.get(
      `/v1/ingest/shelly?token=${gen3.json.token}&device=hall&temp=21.5&hum=40&battery=4.5`,
    );
    expect(shelly.status).toBe(200);
    const devices = (await t.http.get(`/v1/devices?site_id=${siteId}`, { token: user.token })).json.data;
    expect(
      devices.map((d: { local_id: string; model: string }) => `${d.local_id} ${d.model}`).sort(),
    ).toEqual(['a840410000000009 dragino-lht65', 'hall shelly-ht-gen3']);

    for (const [body, code] of [
      [{ model: 'nope' }, 'unknown_model'],
      [{ model: 'shelly-ht-gen1' }, 'model_not_for_integration'],
      [{ kind: 'ttn', model: 'http-generic' }, 'model_not_for_integration'],
      [{ kind: 'shelly', model: 'elsys-ers' }, 'model_not_for_integration'],
    ] as const) {
      const answer = await create(body);
      expect([answer.status, answer.json.error.code]).toEqual([422, code]);
    }
    expect((await create({ model: 7 })).json.error.code).toBe('invalid_request');
  });

  it("keeps another account's integrations out of reach", async () => {
    const a = (await create()).json;
    const b = await signUp(t, 'b@example.com');
    for (const answer of [
      await t.http.get(`/v1/integrations/${a.id}`, { token: b.token }),
      await t.http.delete(`/v1/integrations/${a.id}`, { token: b.token }),
      await t.http.post(`/v1/integrations/${a.id}/rotate-token`, undefined, { token: b.token }),
    ])
      expect([answer.status, answer.json.error.code]).toEqual([404, 'integration_not_found']);
    expect((await t.http.get('/v1/integrations', { token: b.token })).json.data).toEqual([]);
    expect((await create({}, b.token)).json.error.code).toBe('site_not_found');
    expect((await uplink(a.token)).status).toBe(200);
  });
});
