import { afterEach, describe, expect, it } from '@jest/globals';
import { startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';

/**
 * Per-address decisions behind a reverse proxy (TRUST_PROXY): sign-in code entries are limited to
 * 60 per address per 10 minutes. Without a trusted proxy the address is the socket's peer, whatever
 * `X-Forwarded-For` claims (a client could otherwise pick a fresh address per request); with one,
 * each client behind it has its own budget, and the access log names the client.
 */
describe.each(DATABASES)('client addresses on %s', (db) => {
  let t: TestCloud;
  afterEach(async () => t?.stop());

  const verify = (i: number, forwardedFor: string) =>
    t.http.post(
      '/v1/auth/verify',
      { email: `u${i}@example.com`, code: 'AAA-AAA' },
      { headers: { 'x-forwarded-for': forwardedFor } },
    );

  /** Uses up the budget of the address the cloud sees for `forwardedFor`. */
  async function exhaust(forwardedFor: string): Promise<void> {
    for (let i = 0; i < 60; i++) expect((await verify(i, forwardedFor)).status).toBe(401);
    expect((await verify(60, forwardedFor)).status).toBe(429);
  }

  const loggedIps = () => t.logs.filter((l) => l.msg === 'request').map((l) => l.ip);

  it('ignores X-Forwarded-For by default: every request counts against the socket address', async () => {
    t = await startTestCloud({ db });
    await exhaust('198.51.100.1');
    expect((await verify(61, '198.51.100.2')).status).toBe(429);
    expect(new Set(loggedIps())).toEqual(new Set(['127.0.0.1']));
  });

  it.each([['1'], ['loopback'], ['127.0.0.1/32, ::1']])(
    'with TRUST_PROXY=%s, gives each client behind the proxy its own budget and logs its address',
    async (trust) => {
      t = await startTestCloud({ db, env: { TRUST_PROXY: trust } });
      await exhaust('198.51.100.1');
      expect((await verify(61, '198.51.100.2')).status).toBe(401);
      // A client's own X-Forwarded-For entries in front of the proxy's are not believed.
      expect((await verify(62, '198.51.100.2, 198.51.100.1')).status).toBe(429);
      expect(loggedIps()).toContain('198.51.100.2');
      expect(loggedIps()).not.toContain('127.0.0.1');
    },
  );

  it('logs the client of the ingest fast path the same way', async () => {
    t = await startTestCloud({ db, env: { TRUST_PROXY: '1' } });
    const answer = await t.http.get('/v1/ingest/shelly?device=x&temp=3', {
      headers: { 'x-forwarded-for': '203.0.113.7' },
    });
    expect(answer.status).toBe(401);
    expect(loggedIps()).toEqual(['203.0.113.7']);
  });
});
