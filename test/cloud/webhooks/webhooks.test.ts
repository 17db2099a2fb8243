import { spawnSync } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import { verifyWebhookSignature } from '../../../shared/webhook-signature.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { at, MINUTE, rulesWorld, T0, type RulesWorld } from '../rules/world.ts';

interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A real HTTP receiver on 127.0.0.1 that answers with the statuses it is given, in turn. */
async function receiver(statuses: number[] = [200]) {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.statusCode = statuses[Math.min(received.length - 1, statuses.length - 1)]!;
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/monitor`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The signature as an independent implementation computes it: openssl over "<t>." + raw body. */
function opensslSignature(secret: string, t: string, body: string): string {
  const run = spawnSync('openssl', ['dgst', '-sha256', '-hmac', secret, '-binary'], {
    input: `${t}.${body}`,
  });
  if (run.status !== 0) throw new Error(`openssl: ${run.stderr.toString()}`);
  return run.stdout.toString('base64');
}

describe.each(DATABASES)('outbound webhooks on %s', (db) => {
  let w: RulesWorld;
  let close: (() => Promise<void>) | null = null;
  afterEach(async () => {
    await close?.();
    close = null;
    await w?.t.stop();
  });

  async function register(url: string, events: string[]) {
    const answer = await w.t.http.post('/v1/webhooks', { url, events }, { token: w.user.token });
    expect(answer.status).toBe(201);
    return answer.json as { id: string; secret: string; url: string; events: string[] };
  }

  it('delivers a signed alarm.opened that openssl verifies, and the shared helper rejects a stale one', async () => {
    w = await rulesWorld(db, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    const r = await receiver();
    close = r.close;
    const hook = await register(r.url, ['alarm.opened', 'alarm.acknowledged']);
    expect(hook).toEqual({
      id: expect.stringMatching(/^wh_/),
      url: r.url,
      events: ['alarm.opened', 'alarm.acknowledged'],
      secret: expect.stringMatching(/^whsec_[0-9A-Za-z]{43,}$/),
      created_at: at(T0),
    });
    await w.send(T0, 3);
    w.clock.set(T0 + MINUTE);
    await w.send(T0 + MINUTE, 1, 'leak');
    await w.settle();
    await w.t.cloud.services.jobs.drain();
    expect(r.received).toHaveLength(1);
    const { headers, body } = r.received[0]!;
    expect(headers['content-type']).toBe('application/json');
    expect(headers['x-service-event']).toBe('alarm.opened');
    const match = /^t=(\d+),v1=([A-Za-z0-9+/=]+)$/.exec(String(headers['x-service-signature']));
    expect(match).not.toBeNull();
    const [, t, v1] = match!;
    expect(Number(t)).toBe((T0 + MINUTE) / 1_000_000);
    expect(opensslSignature(hook.secret, t!, body)).toBe(v1);
    const parsed = JSON.parse(body);
    expect(parsed).toEqual({
      id: String(headers['x-service-delivery']),
      type: 'alarm.opened',
      created_at: at(T0 + MINUTE),
      data: expect.objectContaining({ kind: 'threshold_high', state: 'open', device_id: w.device.id }),
    });
    expect(parsed.id).toMatch(/^whd_/);

    const header = String(headers['x-service-signature']);
    const nowSeconds = Number(t);
    expect(verifyWebhookSignature({ secret: hook.secret, body, header, nowSeconds })).toEqual({
      ok: true,
      timestamp: nowSeconds,
    });
    expect(
      verifyWebhookSignature({ secret: hook.secret, body, header, nowSeconds: nowSeconds + 301 }),
    ).toEqual({ ok: false, reason: 'stale' });
    expect(
      verifyWebhookSignature({ secret: hook.secret, body: body.replace('open', 'shut'), header, nowSeconds }),
    ).toEqual({
      ok: false,
      reason: 'mismatch',
    });

    // the acknowledgement is delivered too; the list shows the webhook without its secret
    await w.t.http.post(`/v1/events/${parsed.data.id}/ack`, { note: 'mopped up' }, { token: w.user.token });
    await w.t.cloud.services.jobs.drain();
    expect(r.received.map((x) => x.headers['x-service-event'])).toEqual([
      'alarm.opened',
      'alarm.acknowledged',
    ]);
    const list = await w.t.http.get('/v1/webhooks', { token: w.user.token });
    expect(list.json).toEqual({
      data: [{ id: hook.id, url: r.url, events: hook.events, created_at: at(T0) }],
      next_cursor: null,
      has_more: false,
    });
  });

  it('retries with growing delays, records every attempt, and stops after 24 hours', async () => {
    w = await rulesWorld(db, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    const r = await receiver([500, 503, 200]);
    close = r.close;
    const hook = await register(r.url, ['alarm.opened']);
    w.clock.set(T0 + MINUTE);
    await w.send(T0 + MINUTE, 1, 'leak');
    await w.settle();
    const jobs = w.t.cloud.services.jobs;
    await jobs.drain();
    w.clock.set(T0 + MINUTE + 29_000_000);
    await jobs.drain();
    expect(r.received).toHaveLength(1); // the retry is not due before 30 s
    w.clock.set(T0 + MINUTE + 30_000_000);
    await jobs.drain();
    w.clock.set(T0 + MINUTE + 90_000_000);
    await jobs.drain();
    expect(r.received).toHaveLength(3);
    const deliveries = await w.t.http.get(`/v1/webhooks/${hook.id}/deliveries`, { token: w.user.token });
    expect(deliveries.json.data).toEqual([
      expect.objectContaining({
        type: 'alarm.opened',
        state: 'delivered',
        delivered_at: at(T0 + MINUTE + 90_000_000),
        attempts: [
          expect.objectContaining({ attempt: 1, at: at(T0 + MINUTE), status: 500, error: 'answered 500' }),
          expect.objectContaining({ attempt: 2, at: at(T0 + MINUTE + 30_000_000), status: 503 }),
          expect.objectContaining({ attempt: 3, at: at(T0 + MINUTE + 90_000_000), status: 200, error: null }),
        ],
      }),
    ]);
    // every attempt is signed afresh with its own time
    expect(r.received.map((x) => /^t=(\d+)/.exec(String(x.headers['x-service-signature']))![1])).toEqual(
      [0, 30, 90].map((s) => String((T0 + MINUTE) / 1_000_000 + s)),
    );

    // a receiver that never answers 2xx: attempts stop 24 hours after the message was queued
    const down = await receiver([503]);
    const closeFirst = close;
    close = async () => {
      await closeFirst?.();
      await down.close();
    };
    const broken = await register(down.url, ['alarm.resolved']);
    const queuedAt = T0 + 2 * MINUTE;
    w.clock.set(queuedAt);
    await w.send(queuedAt, 0, 'leak');
    await w.settle();
    for (let hour = 0; hour <= 26; hour++) {
      w.clock.set(queuedAt + hour * 60 * MINUTE);
      await jobs.drain();
    }
    const failed = (await w.t.http.get(`/v1/webhooks/${broken.id}/deliveries`, { token: w.user.token })).json
      .data[0];
    expect(failed.state).toBe('failed');
    expect(failed.next_attempt_at).toBeNull();
    const times = failed.attempts.map((a: any) => Date.parse(a.at) * 1000);
    expect(times[times.length - 1]).toBeLessThanOrEqual(queuedAt + 24 * 60 * MINUTE);
    const gaps = times.slice(1).map((t: number, i: number) => t - times[i]);
    for (let i = 1; i < gaps.length; i++) expect(gaps[i]).toBeGreaterThanOrEqual(gaps[i - 1]);
    expect(failed.attempts.length).toBe(down.received.length);
    expect(failed.attempts.length).toBeGreaterThan(10);
  });

  it('refuses loopback, private and link-local URLs with 422 invalid_webhook_url unless WEBHOOK_ALLOW_PRIVATE', async () => {
    w = await rulesWorld(db);
    const token = { token: w.user.token };
    for (const url of [
      'http://127.0.0.1:8080/hook',
      'http://localhost/hook',
      'http://[::1]/hook',
      'http://[::ffff:127.0.0.1]/hook',
      'http://10.1.2.3/hook',
      'http://192.168.1.10/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://0.0.0.0/',
      'ftp://example.com/hook',
      'not a url',
    ]) {
      const answer = await w.t.http.post('/v1/webhooks', { url, events: ['alarm.opened'] }, token);
      expect([url, answer.status, answer.json.error.code]).toEqual([url, 422, 'invalid_webhook_url']);
      // The operator's setting is not the user's to change, and is not named to the user.
      expect(answer.text).not.toContain('WEBHOOK_ALLOW_PRIVATE');
    }
    // A name is refused without the address it resolves to: no map of internal names.
    const named = await w.t.http.post(
      '/v1/webhooks',
      { url: 'http://localhost/hook', events: ['alarm.opened'] },
      token,
    );
    expect(named.json.error.message).toContain('localhost');
    expect(named.text).not.toMatch(/127\.0\.0\.1|::1/);
    // Nor does it tell a name that resolves to a private address from one that does not resolve.
    const missing = await w.t.http.post(
      '/v1/webhooks',
      { url: 'http://no-such-host.invalid/hook', events: ['alarm.opened'] },
      token,
    );
    expect(missing.json.error.message.replace('no-such-host.invalid', 'HOST')).toBe(
      named.json.error.message.replace('localhost', 'HOST'),
    );
    const bad = await w.t.http.post(
      '/v1/webhooks',
      { url: 'https://example.com', events: ['alarm.exploded'] },
      token,
    );
    expect([bad.status, bad.json.error.code]).toEqual([400, 'invalid_request']);
    const none = await w.t.http.post('/v1/webhooks', { url: 'https://example.com', events: [] }, token);
    expect([none.status, none.json.error.code]).toEqual([400, 'invalid_request']);
    const write = await w.t.http.post('/v1/tokens', { label: 'w', scope: 'write' }, token);
    const forbidden = await w.t.http.post(
      '/v1/webhooks',
      { url: 'http://10.0.0.1', events: ['alarm.opened'] },
      { token: write.json.token },
    );
    expect([forbidden.status, forbidden.json.error.code]).toEqual([403, 'forbidden']);
    expect((await w.t.http.delete('/v1/webhooks/wh_nope', token)).json.error.code).toBe('webhook_not_found');
    expect((await w.t.http.get('/v1/webhooks/wh_nope/deliveries', token)).json.error.code).toBe(
      'webhook_not_found',
    );
  });

  it('accepts only global unicast hosts: IPv4 forms hidden in IPv6, benchmarking, documentation and the like are refused', async () => {
    w = await rulesWorld(db);
    const token = { token: w.user.token };
    const refused = [
      'http://[::7f00:1]/hook', // IPv4-compatible ::127.0.0.1
      'http://[::127.0.0.1]/hook',
      'http://[::a00:1]/hook', // IPv4-compatible 10.0.0.1
      'http://[::ffff:10.0.0.1]/hook', // IPv4-mapped
      'http://[::ffff:0:7f00:1]/hook', // IPv4-translated (RFC 6145)
      'http://[64:ff9b::7f00:1]/hook', // NAT64 of 127.0.0.1
      'http://[64:ff9b::c0a8:101]/hook', // NAT64 of 192.168.1.1
      'http://[64:ff9b:1::a00:1]/hook', // local-use NAT64 (RFC 8215)
      'http://[2002:7f00:1::1]/hook', // 6to4 of 127.0.0.1
      'http://[2002:5db8:d70e::1]/hook', // 6to4, whatever it embeds
      'http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook', // Teredo
      'http://[2001:2::1]/hook', // benchmarking
      'http://[2001:db8::1]/hook', // documentation
      'http://[3fff::1]/hook', // documentation (RFC 9637)
      'http://[fc00::1]/hook',
      'http://[fe80::1]/hook',
      'http://[ff02::1]/hook',
      'http://[::]/hook',
      'http://[100::1]/hook', // discard-only
      'http://198.18.0.1/hook', // benchmarking 198.18.0.0/15
      'http://198.19.255.254/hook',
      'http://100.64.0.1/hook', // carrier-grade NAT
      'http://100.127.255.254/hook',
      'http://192.0.0.8/hook',
      'http://192.0.2.1/hook',
      'http://198.51.100.7/hook',
      'http://203.0.113.9/hook',
      'http://192.88.99.1/hook',
      'http://172.31.255.1/hook',
      'http://224.0.0.251/hook',
      'http://240.0.0.1/hook',
      'http://255.255.255.255/hook',
    ];
    for (const url of refused) {
      const answer = await w.t.http.post('/v1/webhooks', { url, events: ['alarm.opened'] }, token);
      expect([url, answer.status, answer.json.error?.code]).toEqual([url, 422, 'invalid_webhook_url']);
    }
    // Public addresses stay allowed, NAT64 of a public IPv4 address included (IPv6-only networks).
    for (const url of [
      'https://93.184.215.14/hook',
      'http://100.128.0.1/hook',
      'http://198.20.0.1/hook',
      'http://172.32.0.1/hook',
      'https://[2606:4700:4700::1111]/hook',
      'https://[64:ff9b::5db8:d70e]/hook',
    ]) {
      const answer = await w.t.http.post('/v1/webhooks', { url, events: ['alarm.opened'] }, token);
      expect([url, answer.status]).toEqual([url, 201]);
    }
  });

  it('still lets a self-hosted install (WEBHOOK_ALLOW_PRIVATE) register any address', async () => {
    w = await rulesWorld(db, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    for (const url of ['http://[::7f00:1]/hook', 'http://198.18.0.1/hook', 'http://10.0.0.2/hook']) {
      const answer = await w.t.http.post(
        '/v1/webhooks',
        { url, events: ['alarm.opened'] },
        { token: w.user.token },
      );
      expect([url, answer.status]).toEqual([url, 201]);
    }
  });

  it('tells device.offline and device.online from the Shelly lwt, and a deleted webhook gets nothing more', async () => {
    w = await rulesWorld(db, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    const r = await receiver();
    close = r.close;
    const hook = await register(r.url, ['device.offline', 'device.online']);
    const shelly = (lwt: string) =>
      w.t.http.get(`/v1/ingest/shelly?token=${w.device.ingest_token}&device=${w.device.local_id}&lwt=${lwt}`);
    expect((await shelly('online')).status).toBe(200);
    expect((await shelly('online')).status).toBe(200); // no flip, no second message
    expect((await shelly('offline')).status).toBe(200);
    await w.t.cloud.services.jobs.drain();
    const types = r.received.map((x) => JSON.parse(x.body));
    expect(types.map((b) => [b.type, b.data.device_id, b.data.online])).toEqual([
      ['device.online', w.device.id, true],
      ['device.offline', w.device.id, false],
    ]);
    expect((await w.t.http.delete(`/v1/webhooks/${hook.id}`, { token: w.user.token })).status).toBe(204);
    await shelly('online');
    await w.t.cloud.services.jobs.drain();
    expect(r.received).toHaveLength(2);
    expect((await w.t.http.get('/v1/webhooks', { token: w.user.token })).json.data).toEqual([]);
  });
});
