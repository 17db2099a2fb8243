import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import type { Answer } from '../../helpers/http.ts';

/** A minute boundary, so a fixed-window rate limit starts a fresh window here. */
const T0 = Date.UTC(2026, 0, 5, 10, 0, 0) * 1000;
const T0_SECONDS = T0 / 1_000_000;
const KIB = 1024;

function expectEnvelope(answer: Answer, status: number, code: string): void {
  expect(answer.status).toBe(status);
  expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
  expect(answer.json).toEqual({
    error: {
      code,
      message: expect.any(String),
      request_id: answer.headers.get('x-request-id'),
      ...(answer.json?.error?.details ? { details: expect.any(Array) } : {}),
    },
  });
  expect(answer.json.error.request_id).toMatch(/^req_[0-9A-Za-z]{20,}$/);
}

describe.each(DATABASES)('the HTTP core on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  afterEach(async () => t?.stop());

  async function start(env: Record<string, string> = {}, clock?: ManualClock): Promise<void> {
    t = await startTestCloud({ db, env, clock });
    user = await signUp(t, 'owner@example.com');
  }

  describe('request ids and the error envelope', () => {
    it('gives every answer an X-Request-Id req_…, the same id as error.request_id, new for each request', async () => {
      await start();
      const answers = [
        await t.http.get('/v1/sites', { token: user.token }),
        await t.http.post('/v1/sites', { name: 'A', vertical: 'generic' }, { token: user.token }),
        await t.http.get('/v1/sites'),
        await t.http.get('/v1/sites', { token: 'ua_live_nope' }),
        await t.http.get('/v1/nowhere'),
        await t.http.post('/v1/sites', { name: 'A', vertical: 'bakery' }, { token: user.token }),
        await t.http.post('/v1/sites', {}, { token: user.token }),
        await t.http.post('/v1/sites', undefined, {
          token: user.token,
          raw: '{',
          headers: { 'content-type': 'application/json' },
        }),
      ];
      const ids = answers.map((a) => a.headers.get('x-request-id'));
      for (const [i, answer] of answers.entries()) {
        expect(ids[i]).toMatch(/^req_[0-9A-Za-z]{20,}$/);
        if (answer.status >= 400) expect(answer.json.error.request_id).toBe(ids[i]);
      }
      expect(new Set(ids).size).toBe(ids.length);
    });

    it('answers an unknown route 404 not_found in the envelope, whatever the method', async () => {
      await start();
      for (const [method, path] of [
        ['GET', '/v1/nowhere'],
        ['DELETE', '/v1/sites'],
        ['PUT', '/v1/sites/site_x'],
        ['GET', '/v2/sites'],
      ]) {
        const answer = await t.http.call(method!, path!, undefined, { token: user.token });
        expectEnvelope(answer, 404, 'not_found');
      }
    });

    it('reads a body of exactly 256 KiB and refuses one byte more with 413 payload_too_large', async () => {
      await start();
      const body = (size: number) => {
        const shell = JSON.stringify({ name: '', vertical: 'generic' });
        return JSON.stringify({ name: 'x'.repeat(size - shell.length), vertical: 'generic' });
      };
      const fits = await t.http.post('/v1/sites', undefined, {
        token: user.token,
        raw: body(256 * KIB),
        headers: { 'content-type': 'application/json' },
      });
      // read and validated: the name is too long, but the size was fine
      expectEnvelope(fits, 400, 'invalid_request');
      expect(fits.json.error.details[0].path).toBe('name');
      const tooLarge = await t.http.post('/v1/sites', undefined, {
        token: user.token,
        raw: body(256 * KIB + 1),
        headers: { 'content-type': 'application/json' },
      });
      expectEnvelope(tooLarge, 413, 'payload_too_large');
      expect((await t.http.get('/v1/sites', { token: user.token })).json.data).toEqual([]);
    });

    it('answers a malformed JSON body with 400 bad_json', async () => {
      await start();
      for (const raw of ['{', '{"name": "A",}', "{'name': 'A'}", 'name=A']) {
        const answer = await t.http.post('/v1/sites', undefined, {
          token: user.token,
          raw,
          headers: { 'content-type': 'application/json' },
        });
        expectEnvelope(answer, 400, 'bad_json');
      }
    });

    it('checks the token before the body: a malformed body without a token is 401', async () => {
      await start();
      const answer = await t.http.post('/v1/sites', undefined, {
        raw: '{',
        headers: { 'content-type': 'application/json' },
      });
      expectEnvelope(answer, 401, 'auth_required');
    });

    it('lists every validation failure in details as {path, message}', async () => {
      await start();
      const answer = await t.http.post(
        '/v1/sites',
        { name: '', timezone: 42, extra: true },
        { token: user.token },
      );
      expectEnvelope(answer, 400, 'invalid_request');
      expect(answer.json.error.details).toEqual(
        expect.arrayContaining([
          { path: 'name', message: expect.any(String) },
          { path: 'vertical', message: expect.any(String) },
          { path: 'timezone', message: expect.any(String) },
        ]),
      );
      for (const detail of answer.json.error.details)
        expect(Object.keys(detail).sort()).toEqual(['message', 'path']);
      const query = await t.http.get('/v1/sites?limit=0', { token: user.token });
      expect(query.json.error.details).toEqual([{ path: 'limit', message: expect.any(String) }]);
    });
  });

  describe('Idempotency-Key', () => {
    const site = { name: 'Kitchen', vertical: 'food_service' };
    const post = (body: unknown, key: string, token = user.token) =>
      t.http.post('/v1/sites', body, { token, headers: { 'idempotency-key': key } });
    const siteCount = async (token = user.token) =>
      (await t.http.get('/v1/sites', { token })).json.data.length as number;

    it('replays the first answer for the same key and body, with Idempotent-Replayed, creating one site', async () => {
      await start();
      const first = await post(site, 'key-1');
      expect(first.status).toBe(201);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      const again = await post(site, 'key-1');
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.json).toEqual(first.json);
      expect(await siteCount()).toBe(1);
    });

    it('answers the same key with a different body, or on another route, 409 idempotency_conflict', async () => {
      await start();
      expect((await post(site, 'key-1')).status).toBe(201);
      expectEnvelope(await post({ ...site, name: 'Other' }, 'key-1'), 409, 'idempotency_conflict');
      const elsewhere = await t.http.post(
        '/v1/tokens',
        { label: 'x', scope: 'read' },
        {
          token: user.token,
          headers: { 'idempotency-key': 'key-1' },
        },
      );
      expectEnvelope(elsewhere, 409, 'idempotency_conflict');
      expect(await siteCount()).toBe(1);
    });

    it('takes keys of up to 128 characters and refuses a longer one with 400 invalid_request', async () => {
      await start();
      expect((await post(site, 'k'.repeat(128))).status).toBe(201);
      const answer = await post(site, 'k'.repeat(129));
      expectEnvelope(answer, 400, 'invalid_request');
      expect(answer.json.error.details[0].path).toBe('Idempotency-Key');
      expect(await siteCount()).toBe(1);
    });

    it('keeps keys per account: B may use A’s key and gets its own site', async () => {
      await start();
      const other = await signUp(t, 'other@example.com');
      const mine = await post(site, 'shared-key');
      const theirs = await post(site, 'shared-key', other.token);
      expect(theirs.status).toBe(201);
      expect(theirs.headers.get('idempotent-replayed')).toBeNull();
      expect(theirs.json.id).not.toBe(mine.json.id);
      expect(await siteCount(other.token)).toBe(1);
      expect(await siteCount()).toBe(1);
    });

    it('replays an error answer as the same error', async () => {
      await start();
      const first = await post({ name: 'X', vertical: 'bakery' }, 'bad-1');
      expectEnvelope(first, 422, 'unknown_vertical');
      const again = await post({ name: 'X', vertical: 'bakery' }, 'bad-1');
      expectEnvelope(again, 422, 'unknown_vertical');
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.json.error.message).toBe(first.json.error.message);
    });

    it('replays a DELETE: a retry answers 204 again instead of 404', async () => {
      await start();
      const created = await post(site, 'create');
      const path = `/v1/sites/${created.json.id}`;
      const del = () => t.http.delete(path, { token: user.token, headers: { 'idempotency-key': 'delete' } });
      expect((await del()).status).toBe(204);
      const again = await del();
      expect(again.status).toBe(204);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect((await t.http.get(path, { token: user.token })).status).toBe(404);
    });

    it('forgets a key after 24 hours', async () => {
      const clock = new ManualClock(T0);
      await start({}, clock);
      expect((await post(site, 'daily')).status).toBe(201);
      clock.advanceMs(24 * 3600 * 1000 - 1000);
      expect((await post(site, 'daily')).headers.get('idempotent-replayed')).toBe('true');
      clock.advanceMs(1000);
      const later = await post(site, 'daily');
      expect(later.status).toBe(201);
      expect(later.headers.get('idempotent-replayed')).toBeNull();
      expect(await siteCount()).toBe(2);
    });
  });

  describe('the management rate limit', () => {
    const LIMIT = { RATE_LIMIT_MGMT_PER_MIN: '5' };

    /** The sign-up's own requests fall in the first minute; the test starts at the next. */
    async function startLimited(env: Record<string, string> = {}): Promise<ManualClock> {
      const clock = new ManualClock(T0);
      await start({ ...LIMIT, ...env }, clock);
      clock.advanceMs(60_000);
      return clock;
    }

    it('counts requests per account in X-RateLimit-Mgmt/-Remaining/-Reset and answers 429 after the 5th', async () => {
      const clock = await startLimited();
      const windowEnd = String(T0_SECONDS + 120);
      for (let i = 1; i <= 5; i++) {
        const answer = await t.http.get('/v1/sites', { token: user.token });
        expect(answer.status).toBe(200);
        expect(answer.headers.get('x-ratelimit-mgmt')).toBe('5');
        expect(answer.headers.get('x-ratelimit-remaining')).toBe(String(5 - i));
        expect(answer.headers.get('x-ratelimit-reset')).toBe(windowEnd);
      }
      const limited = await t.http.post(
        '/v1/sites',
        { name: 'A', vertical: 'generic' },
        { token: user.token },
      );
      expectEnvelope(limited, 429, 'rate_limited');
      expect(limited.headers.get('retry-after')).toBe('60');
      expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(limited.headers.get('x-ratelimit-reset')).toBe(windowEnd);
      expect((await t.http.get('/v1/sites', { token: user.token })).json.data).toBeUndefined();

      clock.advanceMs(45_000);
      expect((await t.http.get('/v1/sites', { token: user.token })).headers.get('retry-after')).toBe('15');

      clock.advanceMs(15_000); // the next window
      const next = await t.http.get('/v1/sites', { token: user.token });
      expect(next.status).toBe(200);
      expect(next.json.data).toEqual([]);
      expect(next.headers.get('x-ratelimit-remaining')).toBe('4');
      expect(next.headers.get('x-ratelimit-reset')).toBe(String(T0_SECONDS + 180));
    });

    it("does not count one account's requests against another", async () => {
      await startLimited();
      const other = await signUp(t, 'other@example.com');
      for (let i = 0; i < 6; i++) await t.http.get('/v1/sites', { token: user.token });
      expect((await t.http.get('/v1/sites', { token: user.token })).status).toBe(429);
      const theirs = await t.http.get('/v1/sites', { token: other.token });
      expect(theirs.status).toBe(200);
    });

    it('serves the request anyway in RATE_LIMIT_MODE=warn, with the headers and a warning logged', async () => {
      await startLimited({ RATE_LIMIT_MODE: 'warn' });
      for (let i = 0; i < 5; i++) await t.http.get('/v1/sites', { token: user.token });
      const over = await t.http.post('/v1/sites', { name: 'A', vertical: 'generic' }, { token: user.token });
      expect(over.status).toBe(201);
      expect(over.headers.get('x-ratelimit-mgmt')).toBe('5');
      expect(over.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(over.headers.get('x-ratelimit-reset')).toBe(String(T0_SECONDS + 120));
      expect(t.logs.filter((l) => l.level === 40 && /rate limit exceeded/.test(String(l.msg)))).toHaveLength(
        1,
      );
    });

    it('shares the counter between two cloud processes on one database', async () => {
      const clock = await startLimited();
      const second = await startTestCloud({ sameDatabaseAs: t, env: LIMIT, clock });
      try {
        const remaining: (string | null)[] = [];
        for (const cloud of [t, second, t, second, t]) {
          const answer = await cloud.http.get('/v1/sites', { token: user.token });
          expect(answer.status).toBe(200);
          remaining.push(answer.headers.get('x-ratelimit-remaining'));
        }
        expect(remaining).toEqual(['4', '3', '2', '1', '0']);
        expectEnvelope(await second.http.get('/v1/sites', { token: user.token }), 429, 'rate_limited');
        expectEnvelope(await t.http.get('/v1/sites', { token: user.token }), 429, 'rate_limited');
      } finally {
        await second.stop();
      }
    });
  });
});
