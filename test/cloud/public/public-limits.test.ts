import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createSite } from '../../helpers/fixtures.ts';
import { deviceWith, HOUR, publish, PUBLIC_ENV, sensorsOf, T0 } from './public-helpers.ts';

/**
 * The public API's limits per client address: 600 requests a minute (X-RateLimit-*, then 429 with
 * Retry-After), 10 flags an hour, the address named by X-Forwarded-For only through a proxy that
 * TRUST_PROXY trusts. The clock is fixed 30 s into a minute, so every request falls in one window.
 */
describe.each(DATABASES)('public API limits on %s', (db) => {
  let t: TestCloud;
  afterEach(async () => t?.stop());

  async function start(env: Record<string, string>): Promise<ManualClock> {
    const clock = new ManualClock(T0 + 30_000_000);
    t = await startTestCloud({ db, clock, env: { ...PUBLIC_ENV, ...env } });
    return clock;
  }

  const from = (address: string) => ({ headers: { 'x-forwarded-for': address } });

  it('allows 600 requests a minute per client address, then answers 429 with Retry-After', async () => {
    const clock = await start({ TRUST_PROXY: 'loopback' });
    const windowEnd = String((T0 + 60_000_000) / 1_000_000);
    const first = await t.http.get('/api/public/stats', from('203.0.113.7'));
    expect(first.status).toBe(200);
    expect({
      limit: first.headers.get('x-ratelimit-limit'),
      remaining: first.headers.get('x-ratelimit-remaining'),
      reset: first.headers.get('x-ratelimit-reset'),
    }).toEqual({ limit: '600', remaining: '599', reset: windowEnd });
    const statuses: number[] = [];
    for (let i = 0; i < 599; i += 50) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(50, 599 - i) }, (_, j) =>
          t.http.get(
            j % 2 ? '/api/public/sensors' : '/api/public/leaderboards?metric=coldest_now',
            from('203.0.113.7'),
          ),
        ),
      );
      statuses.push(...batch.map((a) => a.status));
    }
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    const refused = await t.http.get('/api/public/stats', from('203.0.113.7'));
    expect(refused.status).toBe(429);
    expect(refused.json.error.code).toBe('rate_limited');
    expect(refused.headers.get('retry-after')).toBe('30');
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(refused.headers.get('access-control-allow-origin')).toBe('*');
    // Unknown paths and errors count too, and are refused alike.
    expect((await t.http.get('/api/public/nothing-here', from('203.0.113.7'))).status).toBe(429);
    // Another address has its own budget.
    const other = await t.http.get('/api/public/stats', from('203.0.113.8'));
    expect(other.status).toBe(200);
    expect(other.headers.get('x-ratelimit-remaining')).toBe('599');
    // The next minute starts afresh.
    clock.advanceMs(30_000);
    expect((await t.http.get('/api/public/stats', from('203.0.113.7'))).status).toBe(200);
  });

  it('ignores X-Forwarded-For from a proxy that is not trusted: the socket address pays', async () => {
    await start({});
    const remaining: (string | null)[] = [];
    for (const address of ['203.0.113.1', '203.0.113.2', '203.0.113.3']) {
      remaining.push(
        (await t.http.get('/api/public/stats', from(address))).headers.get('x-ratelimit-remaining'),
      );
    }
    expect(remaining).toEqual(['599', '598', '597']);
  });

  it('behind a trusted proxy, counts the address the proxy saw: addresses a client prepends buy nothing', async () => {
    // The proxy appends the peer it saw; whatever the client wrote before it is not believed.
    await start({ TRUST_PROXY: '127.0.0.1' });
    const remaining: (string | null)[] = [];
    for (const chain of ['203.0.113.9', '10.1.1.1, 203.0.113.9', '198.51.100.77, 203.0.113.9']) {
      remaining.push(
        (await t.http.get('/api/public/stats', from(chain))).headers.get('x-ratelimit-remaining'),
      );
    }
    expect(remaining).toEqual(['599', '598', '597']);
    // Another client behind the same proxy has its own budget.
    const other = await t.http.get('/api/public/stats', from('203.0.113.10'));
    expect(other.headers.get('x-ratelimit-remaining')).toBe('599');
  });

  it('takes 10 flags an hour per client address, then answers 429 with Retry-After', async () => {
    const clock = await start({ TRUST_PROXY: 'loopback' });
    const owner = await signUp(t, 'owner@example.com');
    const site = await createSite(t, owner.token);
    const device = await deviceWith(t, owner.token, site.id, T0, [{ type: 'temperature', value: 20 }]);
    await publish(t, owner.token, device.id, { nickname: 'N', location_name: 'L', lat: 1, lon: 1 });
    const [sensor] = await sensorsOf(t, owner.token, device.id);
    const report = (address: string) =>
      t.http.post(`/api/public/sensors/${sensor!.id}/report`, { reason: 'odd values' }, from(address));
    for (let i = 0; i < 10; i++) expect((await report('198.51.100.1')).status).toBe(202);
    const refused = await report('198.51.100.1');
    expect({ status: refused.status, code: refused.json.error.code }).toEqual({
      status: 429,
      code: 'rate_limited',
    });
    // The hour's window is aligned to the hour: 30 s into 10:00, it ends at 11:00.
    expect(refused.headers.get('retry-after')).toBe(String(3600 - 30));
    expect((await report('198.51.100.2')).status).toBe(202);
    clock.advanceMs(HOUR / 1000);
    expect((await report('198.51.100.1')).status).toBe(202);
    expect(await t.cloud.services.publicApi.flags({ all: false })).toHaveLength(12);
    // An IPv6 client holds a whole /64: its addresses share one budget, another /64 has its own.
    for (let i = 1; i <= 10; i++) expect((await report(`2001:db8:1:2::${i.toString(16)}`)).status).toBe(202);
    expect((await report('2001:db8:1:2:ffff:1:2:3')).status).toBe(429);
    expect((await report('2001:db8:1:3::1')).status).toBe(202);
  });
});
