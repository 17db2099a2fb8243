import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite } from '../../helpers/fixtures.ts';

/**
 * What a browser-borne attack needs is refused: a page of another site (a sibling subdomain is the
 * same "site" to SameSite=Lax) cannot use the session cookie to change anything, nor send a body the
 * API reads as JSON without a preflight; answers are never sniffed, secrets never cached, and /app
 * pages leak no magic-link token through Referer.
 */
describe.each(DATABASES)('browser-facing defences on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  beforeEach(async () => {
    t = await startTestCloud({ db });
    user = await signUp(t, 'owner@example.com');
  });
  afterEach(async () => t?.stop());

  const withCookie = (headers: Record<string, string> = {}, raw?: string) =>
    t.http.post('/v1/tokens', raw === undefined ? { label: 'x', scope: 'admin' } : undefined, {
      cookie: `os_session=${user.cookie}`,
      headers,
      ...(raw === undefined ? {} : { raw }),
    });

  it('refuses a cookie-authenticated change from another site with 403 forbidden', async () => {
    const foreign: Record<string, string>[] = [
      { origin: 'https://evil.example' },
      { origin: 'null' },
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
      { origin: t.url, 'sec-fetch-site': 'same-site' },
    ];
    for (const headers of foreign) {
      const answer = await withCookie(headers);
      expect([answer.status, answer.json.error.code]).toEqual([403, 'forbidden']);
    }
    const tokens = await t.http.get('/v1/tokens', { token: user.token });
    expect(tokens.json.data.map((k: { label: string }) => k.label)).toEqual(['tests']);
  });

  it('accepts it from the cloud’s own origin, and from a client that sends neither header', async () => {
    expect((await withCookie({ origin: t.url, 'sec-fetch-site': 'same-origin' })).status).toBe(201);
    expect((await withCookie({ origin: new URL(t.cloud.config.baseUrl).origin })).status).toBe(201);
    expect((await withCookie({ 'sec-fetch-site': 'none' })).status).toBe(201);
    expect((await withCookie()).status).toBe(201);
  });

  it('lets a bearer token through whatever the origin', async () => {
    const answer = await t.http.post(
      '/v1/sites',
      { name: 'Bar', vertical: 'generic' },
      { token: user.token, headers: { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' } },
    );
    expect(answer.status).toBe(201);
  });

  it('reads a body only as JSON: text/plain and forms are 415 unsupported_media_type', async () => {
    const body = JSON.stringify({ label: 'x', scope: 'admin' });
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
    ]) {
      const answer = await withCookie({ 'content-type': type }, body);
      expect([answer.status, answer.json.error.code]).toEqual([415, 'unsupported_media_type']);
    }
    const bearer = await t.http.post('/v1/sites', undefined, {
      token: user.token,
      raw: JSON.stringify({ name: 'Bar', vertical: 'generic' }),
      headers: { 'content-type': 'text/plain' },
    });
    expect(bearer.status).toBe(415);
    expect((await withCookie({ 'content-type': 'application/json; charset=utf-8' }, body)).status).toBe(201);
  });

  it('keeps accepting device ingest without a content type', async () => {
    const siteId = (await createSite(t, user.token)).id;
    const device = await createDevice(t, user.token, siteId, { local_id: 'fridge-1' });
    const answer = await t.http.post('/v1/ingest', undefined, {
      token: device.ingest_token,
      raw: JSON.stringify({ device: 'fridge-1', measurements: [{ type: 'temperature', value: 3 }] }),
      headers: { 'content-type': '' },
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('sends nosniff on every answer, no-store with every secret, and no Referer from /app', async () => {
    const notFound = await t.http.get('/nowhere');
    expect(notFound.headers.get('x-content-type-options')).toBe('nosniff');
    const list = await t.http.get('/v1/sites', { token: user.token });
    expect(list.headers.get('x-content-type-options')).toBe('nosniff');
    expect(list.headers.get('cache-control')).toBeNull();

    const siteId = (await createSite(t, user.token)).id;
    const device = await t.http.post(
      '/v1/devices',
      { site_id: siteId, local_id: 'd1', name: 'D', model: 'http-generic' },
      { token: user.token },
    );
    const secrets = [
      await t.http.post('/v1/tokens', { label: 'y', scope: 'read' }, { token: user.token }),
      device,
      await t.http.post(`/v1/devices/${device.json.id}/rotate-token`, {}, { token: user.token }),
      await t.http.post('/v1/bridges', { site_id: siteId, name: 'B' }, { token: user.token }),
      await t.http.post(
        '/v1/webhooks',
        { url: 'https://93.184.216.34/hook', events: ['alarm.opened'] },
        { token: user.token },
      ),
    ];
    for (const answer of secrets) {
      expect(answer.status).toBeLessThan(300);
      expect(answer.headers.get('cache-control')).toBe('no-store');
    }

    const callback = await t.http.get('/app/auth/callback?t=nope');
    expect(callback.headers.get('referrer-policy')).toBe('same-origin');
  });
});
