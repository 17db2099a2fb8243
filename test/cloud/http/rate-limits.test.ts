import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';

/**
 * Rate limits with counters batched in memory (docs/design/rate-limits.md), through real servers:
 * a limit of 100 has a slack of 5, so its first 95 requests are counted in memory and the last 5 are
 * each written before they are answered.
 */
const T0 = Date.UTC(2026, 0, 5, 10, 0, 0) * 1000; // a minute boundary
const T0_SECONDS = T0 / 1_000_000;
const LIMIT = 100;
const SLACK = 5;

describe.each(DATABASES)('batched rate limits on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  const others: TestCloud[] = [];
  afterEach(async () => {
    for (const other of others.splice(0)) await other.stop();
    await t?.stop();
  });

  /** The sign-up's requests fall in the first minute; the test's start at the next. */
  async function start(env: Record<string, string> = {}): Promise<ManualClock> {
    const clock = new ManualClock(T0);
    t = await startTestCloud({ db, env: { RATE_LIMIT_MGMT_PER_MIN: String(LIMIT), ...env }, clock });
    user = await signUp(t, 'owner@example.com');
    clock.advanceMs(60_000);
    return clock;
  }

  async function second(clock: ManualClock, env: Record<string, string> = {}): Promise<TestCloud> {
    const cloud = await startTestCloud({
      sameDatabaseAs: t,
      env: { RATE_LIMIT_MGMT_PER_MIN: String(LIMIT), ...env },
      clock,
    });
    others.push(cloud);
    return cloud;
  }

  async function written(): Promise<number | undefined> {
    const row = await t.cloud.services.db
      .selectFrom('rate_limit_counters')
      .select('count')
      .where('bucket', '=', `mgmt:${user.accountId}`)
      .where('window_start', '=', T0_SECONDS + 60)
      .executeTakeFirst();
    return row?.count;
  }

  const sites = (cloud: TestCloud) => cloud.http.get('/v1/sites', { token: user.token });

  it('answers X-RateLimit-Mgmt/-Remaining/-Reset exactly for every request and 429 after the limit', async () => {
    const clock = await start();
    for (let i = 1; i <= LIMIT; i++) {
      const answer = await sites(t);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('x-ratelimit-mgmt')).toBe(String(LIMIT));
      expect(answer.headers.get('x-ratelimit-remaining')).toBe(String(LIMIT - i));
      expect(answer.headers.get('x-ratelimit-reset')).toBe(String(T0_SECONDS + 120));
    }
    clock.advanceMs(20_000);
    const limited = await t.http.post('/v1/sites', { name: 'A', vertical: 'generic' }, { token: user.token });
    expect(limited.status).toBe(429);
    expect(limited.json.error.code).toBe('rate_limited');
    expect(limited.headers.get('retry-after')).toBe('40');
    expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(limited.headers.get('x-ratelimit-reset')).toBe(String(T0_SECONDS + 120));
    clock.advanceMs(40_000);
    expect((await sites(t)).headers.get('x-ratelimit-remaining')).toBe(String(LIMIT - 1));
  });

  it("lets the admin find and revoke a token that spent the account's budget, by API and in the dashboard", async () => {
    // GET /v1/accounts/me, GET /v1/tokens and DELETE /v1/tokens/{id} spend the caller's own budget.
    await start();
    const leaked = await t.http.post('/v1/tokens', { label: 'leaked', scope: 'read' }, { token: user.token });
    for (let i = 1; i < LIMIT; i++) await t.http.get('/v1/sites', { token: leaked.json.token });
    expect((await t.http.get('/v1/sites', { token: leaked.json.token })).status).toBe(429);
    expect((await sites(t)).status).toBe(429); // the budget is the account's (docs/api.md)
    const session = { cookie: `os_session=${user.cookie}` };
    expect((await t.http.get('/app/api/sites', session)).status).toBe(429);
    // The way out stays open: who am I, the token list, the revocation.
    expect((await t.http.get('/app/api/accounts/me', session)).status).toBe(200);
    const listed = await t.http.get('/app/api/tokens', session);
    expect(listed.status).toBe(200);
    expect(listed.headers.get('x-ratelimit-mgmt')).toBe(String(LIMIT)); // the session's own budget
    expect(listed.json.data.map((tok: { id: string }) => tok.id)).toContain(leaked.json.id);
    expect((await t.http.get('/v1/tokens', { token: user.token })).status).toBe(200);
    const revoked = await t.http.delete(`/v1/tokens/${leaked.json.id}`, { token: user.token });
    expect(revoked.status).toBe(204);
    expect((await t.http.get('/v1/sites', { token: leaked.json.token })).status).toBe(401);
  });

  it('serves over the limit in RATE_LIMIT_MODE=warn and logs each one', async () => {
    await start({ RATE_LIMIT_MODE: 'warn' });
    for (let i = 0; i < LIMIT; i++) expect((await sites(t)).status).toBe(200);
    const over = [await sites(t), await sites(t)];
    expect(over.map((a) => [a.status, a.headers.get('x-ratelimit-remaining')])).toEqual([
      [200, '0'],
      [200, '0'],
    ]);
    expect(t.logs.filter((l) => l.level === 40 && /rate limit exceeded/.test(String(l.msg)))).toHaveLength(2);
  });

  it('keeps far-from-the-limit counts in memory until the flush, and stop() writes them', async () => {
    // 1000 a minute: 50 of slack, written when 25 are waiting or after RATE_LIMIT_SYNC_MS.
    const env = { RATE_LIMIT_MGMT_PER_MIN: '1000', RATE_LIMIT_SYNC_MS: '60000' };
    const clock = await start(env);
    for (let i = 0; i < 10; i++) await sites(t);
    expect(await written()).toBe(1); // the first request of the window reads the row
    await t.cloud.services.rateLimiter.flush();
    expect(await written()).toBe(10);
    for (let i = 0; i < 10; i++) await sites(t);
    const next = await second(clock, env);
    await t.cloud.stop();
    expect((await sites(next)).headers.get('x-ratelimit-remaining')).toBe(String(1000 - 21));
  });

  it('lets two cloud processes on one database together serve at most the limit plus the slack', async () => {
    const clock = await start();
    const other = await second(clock);
    const statuses: number[] = [];
    // Eight clients at a time, half on each process, until both refuse.
    for (let round = 0; round < 20; round++) {
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) => sites(i % 2 ? t : other).then((a) => a.status)),
      );
      statuses.push(...answers);
    }
    const served = statuses.filter((s) => s === 200).length;
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
    expect(served).toBeGreaterThanOrEqual(LIMIT);
    expect(served).toBeLessThanOrEqual(LIMIT + SLACK);
    expect((await sites(t)).status).toBe(429);
    expect((await sites(other)).status).toBe(429);
  });

  it('writes every request at once with RATE_LIMIT_SYNC_MS=0, as before', async () => {
    await start({ RATE_LIMIT_SYNC_MS: '0' });
    for (let i = 0; i < 10; i++) await sites(t);
    expect(await written()).toBe(10);
  });
});
