import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import type { RouteDef } from '../../../cloud/src/http/route-table.ts';
import { codeFromMail, signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import type { CallOptions } from '../../helpers/http.ts';

const T0 = Date.UTC(2026, 0, 5, 10, 0, 0) * 1000;
const DAY = 24 * 3600 * 1_000_000;
const XHR = { 'x-requested-with': 'XMLHttpRequest' };

const routeKey = (route: RouteDef) => `${route.method.toUpperCase()} ${route.path}`;
/** A route's path with every parameter filled in (ids that exist nowhere: auth comes first). */
const pathOf = (route: RouteDef) => route.path.replace(/:(\w+)/g, 'x_nope');

/**
 * The dashboard's `/app/api`: the `/v1` routes a signed-in person uses, derived from the same
 * definitions; the session cookie only; `X-Requested-With` on every state-changing request.
 */
describe.each(DATABASES)('the dashboard API /app/api on %s', (db) => {
  let t: TestCloud;
  let clock: ManualClock;
  let user: SignedIn;
  let dashboard: RouteDef[];

  const call = (route: RouteDef, options: CallOptions) =>
    t.http.call(route.method.toUpperCase(), pathOf(route), route.method === 'get' ? undefined : {}, options);

  beforeAll(async () => {
    clock = new ManualClock(T0);
    t = await startTestCloud({ db, clock, env: { SESSION_MAX_DAYS: '365' } });
    user = await signUp(t, 'manager@example.com');
    dashboard = t.cloud.dashboardRoutes;
  });
  afterAll(async () => t?.stop());

  it('serves every /v1 route a signed-in person uses at the same path under /app/api, and nothing else', () => {
    const v1 = t.cloud.routes;
    const expected = v1
      .filter((r) => r.path.startsWith('/v1/'))
      .filter((r) => (r.auth === 'none' ? r.path.startsWith('/v1/auth/') : r.auth !== 'device'))
      .map((r) => `${r.method.toUpperCase()} /app/api${r.path.slice(3)}`);
    expect(expected).toContain('POST /app/api/auth/request');
    expect(expected).toContain('POST /app/api/sites');
    expect(dashboard.map(routeKey).sort()).toEqual([...expected, 'GET /app/api/stream'].sort());
    for (const route of dashboard) {
      expect([routeKey(route), route.dashboard, route.auth === 'none' || route.auth === 'session']).toEqual([
        routeKey(route),
        true,
        true,
      ]);
      const same = v1.find((r) => r.method === route.method && `/app/api${r.path.slice(3)}` === route.path);
      if (same) expect(route.handler).toBe(same.handler);
    }
    expect(dashboard.some((r) => r.path.includes('ingest'))).toBe(false);
  });

  it('keeps /app/api out of the OpenAPI document', async () => {
    const doc = (await t.http.get('/v1/openapi.json')).json;
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/app/api'))).toEqual([]);
  });

  it('answers every state-changing /app/api route without X-Requested-With 403 forbidden, before anything else', async () => {
    const changing = dashboard.filter((r) => r.method !== 'get');
    expect(changing.length).toBeGreaterThan(20);
    const tokensBefore = (await t.http.get('/v1/tokens', { token: user.token })).json.data.length;
    for (const options of [
      { cookie: `os_session=${user.cookie}` },
      {},
      { token: user.token },
      { cookie: `os_session=${user.cookie}`, headers: { 'x-requested-with': 'fetch' } },
    ] satisfies CallOptions[]) {
      for (const route of changing) {
        const answer = await call(route, options);
        expect([routeKey(route), answer.status, answer.json?.error?.code]).toEqual([
          routeKey(route),
          403,
          'forbidden',
        ]);
        expect(answer.json.error.message).toContain('X-Requested-With');
      }
    }
    // the session still works: nothing above signed it out or changed anything
    expect((await t.http.get('/v1/tokens', { token: user.token })).json.data.length).toBe(tokensBefore);
    const me = await t.http.get('/app/api/accounts/me', { cookie: `os_session=${user.cookie}` });
    expect(me.status).toBe(200);
  });

  it('answers every /app/api route that needs a session 401 auth_required without one, and with a bearer token instead', async () => {
    const signedIn = dashboard.filter((r) => r.auth !== 'none');
    expect(signedIn.map(routeKey)).toContain('GET /app/api/stream');
    for (const options of [
      { headers: XHR },
      { headers: XHR, token: user.token },
      { headers: XHR, cookie: 'os_session=oss_unknown' },
      { headers: { ...XHR, authorization: `Bearer ${user.token}` }, cookie: 'os_session=' },
    ] satisfies CallOptions[]) {
      for (const route of signedIn) {
        const answer = await call(route, options);
        expect([routeKey(route), answer.status, answer.json?.error?.code]).toEqual([
          routeKey(route),
          401,
          'auth_required',
        ]);
      }
    }
  });

  it('acts for the account with the admin scope, with the same answers and errors as /v1', async () => {
    const cookie = `os_session=${user.cookie}`;
    const site = await t.http.post(
      '/app/api/sites',
      { name: 'Pharmacy', vertical: 'generic' },
      { cookie, headers: XHR },
    );
    expect(site.status).toBe(201);
    const viaV1 = await t.http.get(`/v1/sites/${site.json.id}`, { token: user.token });
    const viaApp = await t.http.get(`/app/api/sites/${site.json.id}`, { cookie });
    expect(viaApp.json).toEqual(viaV1.json);
    const token = await t.http.post(
      '/app/api/tokens',
      { label: 'ci', scope: 'admin' },
      { cookie, headers: XHR },
    );
    expect([token.status, token.json.scope]).toEqual([201, 'admin']);
    const bad = await t.http.post('/app/api/sites', { name: '' }, { cookie, headers: XHR });
    expect([bad.status, bad.json.error.code, typeof bad.json.error.request_id]).toEqual([
      400,
      'invalid_request',
      'string',
    ]);
    const missing = await t.http.get('/app/api/sites/site_nope', { cookie });
    expect([missing.status, missing.json.error.code]).toEqual([404, 'site_not_found']);
    const unknown = await t.http.get('/app/api/nothing/here', { cookie });
    expect([unknown.status, unknown.json.error.code]).toEqual([404, 'not_found']);
    // the same rate-limit family as /v1
    expect(viaApp.headers.get('x-ratelimit-mgmt')).toBe(viaV1.headers.get('x-ratelimit-mgmt'));
  });

  it('refuses the cookie from another site even when an Authorization header is sent along', async () => {
    const answer = await t.http.post(
      '/app/api/sites',
      { name: 'Evil', vertical: 'generic' },
      {
        cookie: `os_session=${user.cookie}`,
        token: user.token,
        headers: { ...XHR, origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
      },
    );
    expect([answer.status, answer.json.error.code]).toEqual([403, 'forbidden']);
  });

  it('signs in, rolls the session forward with every request, and signs out, all under /app/api', async () => {
    const email = 'pharmacist@example.com';
    const mail = t.nextMail(email);
    expect((await t.http.post('/app/api/auth/request', { email }, { headers: XHR })).status).toBe(200);
    const code = codeFromMail(await mail)
      .replace('-', '')
      .toLowerCase();
    const verified = await t.http.post('/app/api/auth/verify', { email, code }, { headers: XHR });
    expect(verified.status).toBe(200);
    const cookie = `os_session=${verified.cookie('os_session')}`;

    // 20 days later a request extends the session to 30 days from then (the cookie is sent again)
    clock.set(clock.nowMicros() + 20 * DAY);
    const later = await t.http.get('/app/api/accounts/me', { cookie });
    expect(later.status).toBe(200);
    expect(later.headers.getSetCookie()[0]).toMatch(/^os_session=[^;]+; Path=\/; Max-Age=2592000; HttpOnly/);
    // 29 idle days on, 49 after sign-in: still signed in; 31 idle days: signed out
    clock.set(clock.nowMicros() + 29 * DAY);
    expect((await t.http.get('/app/api/sites', { cookie })).status).toBe(200);
    clock.set(clock.nowMicros() + 31 * DAY);
    const expired = await t.http.get('/app/api/sites', { cookie });
    expect([expired.status, expired.json.error.code]).toEqual([401, 'auth_required']);

    const again = t.nextMail(email);
    await t.http.post('/app/api/auth/request', { email }, { headers: XHR });
    const second = await t.http.post(
      '/app/api/auth/verify',
      { email, code: codeFromMail(await again) },
      { headers: XHR },
    );
    const cookie2 = `os_session=${second.cookie('os_session')}`;
    const out = await t.http.post('/app/api/auth/logout', undefined, { cookie: cookie2, headers: XHR });
    expect(out.status).toBe(204);
    expect(out.headers.getSetCookie()[0]).toMatch(/^os_session=; Path=\/; Max-Age=0/);
    expect((await t.http.get('/app/api/sites', { cookie: cookie2 })).status).toBe(401);
  });
});
