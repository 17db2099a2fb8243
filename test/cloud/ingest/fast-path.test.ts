import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite, measurementCount, type CreatedDevice } from '../../helpers/fixtures.ts';
import type { Answer } from '../../helpers/http.ts';

/**
 * `POST /v1/ingest` and `GET /v1/ingest/shelly` are served in front of Express
 * (cloud/src/ingest/ingest.fast-path.ts); other spellings of the same routes (a trailing slash, a
 * query string on the POST, an Idempotency-Key, a compressed body) still go through Express. Both must
 * answer alike: same status, body, envelope and headers.
 */
describe.each(DATABASES)('the ingest fast path and the Express route answer alike, on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let device: CreatedDevice;

  beforeEach(async () => {
    t = await startTestCloud({ db });
    user = await signUp(t, 'ops@example.com');
    const site = await createSite(t, user.token, { vertical: 'pharma' });
    device = await createDevice(t, user.token, site.id, { local_id: 'fridge-1' });
  });
  afterEach(async () => t?.stop());

  /** What must be equal: everything but the request id (which is this request's own). */
  function comparable(a: Answer) {
    const headers: Record<string, string | null> = {};
    for (const name of [
      'content-type',
      'x-ratelimit-device',
      'x-ratelimit-remaining',
      'x-ratelimit-reset',
      'retry-after',
    ])
      headers[name] = a.headers.get(name);
    const json = structuredClone(a.json);
    if (json?.error) {
      expect(json.error.request_id).toBe(a.headers.get('x-request-id'));
      delete json.error.request_id;
    }
    // Remaining counts down by one per request: compare what the two differ by elsewhere.
    delete headers['x-ratelimit-remaining'];
    return { status: a.status, json, headers };
  }

  const post = (
    path: string,
    raw: string | Buffer,
    headers: Record<string, string> = {},
    token = device.ingest_token,
  ) =>
    t.http.post(path, undefined, { token, raw, headers: { 'content-type': 'application/json', ...headers } });

  it('answers every outcome of POST /v1/ingest identically on both paths', async () => {
    const ts = (s: number) => `2026-01-05T10:00:${String(s).padStart(2, '0')}Z`;
    // `raw(k)`: the body sent on path k (0: fast path, 1: Express); only the stored case differs (its ts).
    const same = (raw: string) => () => raw;
    const one = (m: unknown, extra: Record<string, unknown> = { device: 'fridge-1' }) =>
      same(JSON.stringify({ ...extra, measurements: [m] }));
    const cases: { raw: (k: number) => string; token?: string; headers?: Record<string, string> }[] = [
      {
        raw: (k) =>
          JSON.stringify({
            device: 'fridge-1',
            ts: ts(k),
            measurements: [{ type: 'temperature', value: 4 }],
          }),
      },
      { raw: same('{"device": "fridge-1", ') },
      { raw: same('') },
      { raw: same(JSON.stringify({ device: 'fridge-1', measurements: [] })) },
      { raw: one({ type: 'warp', value: 1 }) },
      { raw: one({ type: 'temperature', value: 900 }) },
      { raw: one({ type: 'temperature', value: 4 }, { device: 'other' }) },
      { raw: one({ type: 'temperature', value: 4 }, {}), token: 'ds_live_nope' },
      { raw: one({ type: 'temperature', value: 4 }, {}), token: user.token },
      { raw: one({ type: 'temperature', value: 4 }, {}), headers: { 'X-Device-Id': 'other' } },
    ];
    for (const c of cases) {
      const fast = await post('/v1/ingest', c.raw(0), c.headers, c.token);
      const viaExpress = await post('/v1/ingest/', c.raw(1), c.headers, c.token);
      expect(fast.headers.get('x-request-id')).toMatch(/^req_/);
      expect(comparable(viaExpress)).toEqual(comparable(fast));
    }
    expect(await measurementCount(t)).toBe(2);
  });

  it('refuses a body over 256 KiB with 413 payload_too_large on both paths', async () => {
    const big = JSON.stringify({ device: 'fridge-1', pad: 'x'.repeat(256 * 1024), measurements: [] });
    const fast = await post('/v1/ingest', big);
    const viaExpress = await post('/v1/ingest/', big);
    expect(comparable(fast)).toMatchObject({ status: 413, json: { error: { code: 'payload_too_large' } } });
    expect(comparable(viaExpress)).toEqual(comparable(fast));
  });

  it('leaves a gzip-compressed body and an Idempotency-Key to Express, which reads and answers them', async () => {
    const body = JSON.stringify({
      device: 'fridge-1',
      ts: '2026-01-05T11:00:00Z',
      measurements: [{ type: 'temperature', value: 5 }],
    });
    const zipped = await post('/v1/ingest', gzipSync(body), { 'content-encoding': 'gzip' });
    expect(zipped.status).toBe(200);
    expect(zipped.json.accepted).toBe(1);
    const keyed = await post(
      '/v1/ingest',
      JSON.stringify({ ...JSON.parse(body), ts: '2026-01-05T12:00:00Z' }),
      {
        'Idempotency-Key': 'k-1',
      },
    );
    const replay = await post(
      '/v1/ingest',
      JSON.stringify({ ...JSON.parse(body), ts: '2026-01-05T12:00:00Z' }),
      {
        'Idempotency-Key': 'k-1',
      },
    );
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.json).toEqual(keyed.json);
    expect(await measurementCount(t)).toBe(2);
  });

  it('answers the Shelly GET identically on both paths, and logs neither token', async () => {
    const query = (extra: string) => `?device=fridge-1&token=${device.ingest_token}&temp=4.5${extra}`;
    for (const extra of ['&ts=1767607200', '&temp2=nan', '&ts=bad']) {
      const fast = await t.http.get(`/v1/ingest/shelly${query(extra)}`);
      const viaExpress = await t.http.get(`/v1/ingest/shelly/${query(extra)}`);
      expect(comparable(viaExpress)).toEqual(comparable(fast));
    }
    const lines = JSON.stringify(t.logs);
    expect(lines).toContain('/v1/ingest/shelly');
    expect(lines).not.toContain(device.ingest_token);
  });
});
