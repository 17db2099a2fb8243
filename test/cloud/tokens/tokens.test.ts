import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { requiredScope, type RouteDef } from '../../../cloud/src/http/route-table.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { auditOf } from '../../helpers/fixtures.ts';

const T0 = Date.UTC(2026, 0, 5, 10, 0, 0) * 1000;
const DAY_MS = 24 * 3600 * 1000;

/** A route path with placeholder ids: scope is checked before any lookup, so they need not exist. */
function concrete(route: RouteDef): string {
  return route.path.replace(/:(\w+)/g, (_m, name: string) => `${name.replace(/_id$/, '')}_x`);
}

/** Calls a route as its method expects: mutations with an empty JSON object, reads without a body. */
function callRoute(t: TestCloud, route: RouteDef, token: string) {
  const body = route.method === 'get' ? undefined : {};
  return t.http.call(route.method.toUpperCase(), concrete(route), body, { token });
}

function isUserRoute(route: RouteDef): boolean {
  return route.auth === 'user' || route.auth === 'user-or-session';
}

describe.each(DATABASES)('user API tokens on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  afterEach(async () => t?.stop());

  async function start(clock?: ManualClock): Promise<void> {
    t = await startTestCloud({ db, clock });
    user = await signUp(t, 'owner@example.com');
  }

  async function makeToken(scope: string, label = `${scope} token`): Promise<{ id: string; token: string }> {
    const answer = await t.http.post('/v1/tokens', { label, scope }, { token: user.token });
    expect(answer.status).toBe(201);
    return answer.json;
  }

  async function listed(): Promise<Record<string, unknown>[]> {
    const answer = await t.http.get('/v1/tokens', { token: user.token });
    expect(answer.status).toBe(200);
    return answer.json.data;
  }

  it('creates a token with the session cookie and with an admin token: 201, plaintext once', async () => {
    await start();
    const withCookie = await t.http.post(
      '/v1/tokens',
      { label: 'ci', scope: 'read' },
      { cookie: `os_session=${user.cookie}` },
    );
    const withToken = await t.http.post(
      '/v1/tokens',
      { label: 'deploy', scope: 'write' },
      { token: user.token },
    );
    for (const [answer, label, scope] of [
      [withCookie, 'ci', 'read'],
      [withToken, 'deploy', 'write'],
    ] as const) {
      expect(answer.status).toBe(201);
      expect(answer.json).toEqual({
        id: expect.stringMatching(/^tok_/),
        token: expect.stringMatching(/^ua_live_[0-9A-Za-z]{43,}$/),
        label,
        scope,
        created_at: expect.stringMatching(/Z$/),
      });
      expect((await t.http.get('/v1/sites', { token: answer.json.token })).status).toBe(200);
    }
  });

  it.each(['read', 'write'])('refuses a %s token creating a token with 403 forbidden', async (scope) => {
    await start();
    const weak = await makeToken(scope);
    const answer = await t.http.post(
      '/v1/tokens',
      { label: 'escalate', scope: 'admin' },
      { token: weak.token },
    );
    expect(answer.status).toBe(403);
    expect(answer.json.error.code).toBe('forbidden');
    expect(await listed()).toHaveLength(2); // the admin token of signUp and the weak one, nothing more
  });

  it('refuses an unknown scope with 422 invalid_scope', async () => {
    await start();
    const answer = await t.http.post('/v1/tokens', { label: 'x', scope: 'root' }, { token: user.token });
    expect(answer.status).toBe(422);
    expect(answer.json.error.code).toBe('invalid_scope');
  });

  it('refuses a token without label with 400 invalid_request', async () => {
    await start();
    const answer = await t.http.post('/v1/tokens', { scope: 'read' }, { token: user.token });
    expect(answer.status).toBe(400);
    expect(answer.json.error.details[0].path).toBe('label');
  });

  it('lists id, label, scope, created_at, last_used_at, consider_rotating and never a secret', async () => {
    await start();
    const created = await makeToken('read', 'dashboard');
    const answer = await t.http.get('/v1/tokens', { token: user.token });
    expect(answer.json.data).toEqual([
      expect.objectContaining({ label: 'tests', scope: 'admin' }),
      {
        id: created.id,
        label: 'dashboard',
        scope: 'read',
        created_at: expect.stringMatching(/Z$/),
        last_used_at: null,
        consider_rotating: false,
      },
    ]);
    for (const row of answer.json.data) {
      expect(Object.keys(row).sort()).toEqual(
        ['consider_rotating', 'created_at', 'id', 'label', 'last_used_at', 'scope'].sort(),
      );
    }
    const [row] = await t.cloud.services.db
      .selectFrom('api_tokens')
      .select('token_hash')
      .where('id', '=', created.id)
      .execute();
    expect(answer.text).not.toContain(created.token);
    expect(answer.text).not.toContain(created.token.slice('ua_live_'.length));
    expect(answer.text).not.toContain(row!.token_hash);
  });

  it('sets last_used_at once the token is used', async () => {
    const clock = new ManualClock(T0);
    await start(clock);
    const created = await makeToken('read');
    expect((await listed()).find((r) => r.id === created.id)!.last_used_at).toBeNull();
    clock.advanceMs(5 * 60 * 1000);
    await t.http.get('/v1/sites', { token: created.token });
    expect((await listed()).find((r) => r.id === created.id)!.last_used_at).toBe('2026-01-05T10:05:00Z');
  });

  it('flags a token older than 365 days consider_rotating, and it keeps working', async () => {
    const clock = new ManualClock(T0);
    await start(clock);
    const old = await makeToken('read', 'old');
    clock.advanceMs(365 * DAY_MS);
    const fresh = await makeToken('read', 'fresh');
    expect((await listed()).find((r) => r.id === old.id)!.consider_rotating).toBe(false);
    clock.advanceMs(1000);
    const rows = await listed();
    expect(rows.find((r) => r.id === old.id)!.consider_rotating).toBe(true);
    expect(rows.find((r) => r.id === fresh.id)!.consider_rotating).toBe(false);
    expect((await t.http.get('/v1/sites', { token: old.token })).status).toBe(200);
  });

  it('revokes a token: 204, and it gets 401 token_invalid on its very next request', async () => {
    await start();
    const created = await makeToken('write');
    expect((await t.http.get('/v1/sites', { token: created.token })).status).toBe(200);
    const answer = await t.http.delete(`/v1/tokens/${created.id}`, { token: user.token });
    expect(answer.status).toBe(204);
    const after = await t.http.get('/v1/sites', { token: created.token });
    expect(after.status).toBe(401);
    expect(after.json.error.code).toBe('token_invalid');
    expect((await listed()).map((r) => r.id)).not.toContain(created.id);
  });

  it('answers 404 token_not_found for an unknown, a revoked and a foreign token', async () => {
    await start();
    const created = await makeToken('read');
    await t.http.delete(`/v1/tokens/${created.id}`, { token: user.token });
    const other = await signUp(t, 'other@example.com');
    const [foreign] = (await t.http.get('/v1/tokens', { token: other.token })).json.data;
    for (const id of ['tok_unknown', created.id, foreign.id]) {
      const answer = await t.http.delete(`/v1/tokens/${id}`, { token: user.token });
      expect([id, answer.status, answer.json.error.code]).toEqual([id, 404, 'token_not_found']);
    }
    expect((await t.http.get('/v1/sites', { token: other.token })).status).toBe(200);
  });

  it('audits token.created and token.revoked with the label', async () => {
    await start();
    const created = await makeToken('read', 'kiosk');
    await t.http.delete(`/v1/tokens/${created.id}`, { token: user.token });
    expect(await auditOf(t, user.token, 'token.created')).toEqual([
      expect.objectContaining({
        by: user.userId,
        target: created.id,
        details: { label: 'kiosk', scope: 'read' },
      }),
      expect.objectContaining({ by: user.userId, details: { label: 'tests', scope: 'admin' } }),
    ]);
    expect(await auditOf(t, user.token, 'token.revoked')).toEqual([
      expect.objectContaining({ by: user.userId, target: created.id, details: { label: 'kiosk' } }),
    ]);
  });

  it('gives a read token 403 forbidden on every mutating or admin route, and lets it read', async () => {
    await start();
    const read = await makeToken('read');
    const routes = t.cloud.routes.filter(isUserRoute);
    expect(routes.filter((r) => r.method !== 'get').length).toBeGreaterThan(5);
    for (const route of routes) {
      const answer = await callRoute(t, route, read.token);
      const label = `${route.method} ${route.path}`;
      // Reads need the read scope, except the few that need admin (the audit chain verification).
      if (route.method === 'get' && requiredScope(route) !== 'admin')
        expect([label, answer.status]).not.toEqual([label, 403]);
      else expect([label, answer.status, answer.json.error.code]).toEqual([label, 403, 'forbidden']);
    }
  });

  it('gives a write token 403 forbidden on token creation and deletion only', async () => {
    await start();
    const write = await makeToken('write');
    const adminOnly = t.cloud.routes.filter((r) => isUserRoute(r) && requiredScope(r) === 'admin');
    expect(adminOnly.map((r) => `${r.method} ${r.path}`)).toEqual(
      expect.arrayContaining(['post /v1/tokens', 'delete /v1/tokens/:token_id']),
    );
    for (const route of t.cloud.routes.filter(isUserRoute)) {
      const answer = await callRoute(t, route, write.token);
      const label = `${route.method} ${route.path}`;
      if (adminOnly.includes(route))
        expect([label, answer.status, answer.json.error.code]).toEqual([label, 403, 'forbidden']);
      else expect([label, answer.status]).not.toEqual([label, 403]);
    }
    expect(await listed()).toHaveLength(2);
  });
});
