import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { type CreatedDevice, createDevice, createSite, measurementCount } from '../../helpers/fixtures.ts';

/**
 * A clock in the middle of a minute, for tests that count against the per-minute limit: on the real
 * one, requests that straddle a minute's end are counted in two windows.
 */
const midMinute = () => new ManualClock(Date.UTC(2026, 0, 5, 12, 0, 30) * 1000);

describe.each(DATABASES)('POST /v1/ingest on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let siteId: string;
  let device: CreatedDevice;

  async function start(env: Record<string, string> = {}, clock?: ManualClock) {
    t = await startTestCloud({ db, env, clock });
    user = await signUp(t, 'ops@example.com');
    siteId = (await createSite(t, user.token, { vertical: 'pharma' })).id;
    device = await createDevice(t, user.token, siteId, { local_id: 'fridge-1' });
  }

  const ingest = (body: unknown, headers: Record<string, string> = {}, token = device.ingest_token) =>
    t.http.post('/v1/ingest', body, { token, headers });

  const sensorsOf = async () =>
    (await t.http.get(`/v1/devices/${device.id}/sensors`, { token: user.token })).json.data;

  afterEach(async () => t?.stop());

  describe('accepting data', () => {
    beforeEach(async () => start());

    it('stores the measurements, creates one channel per (type, label) with the vertical defaults, and answers them', async () => {
      const answer = await ingest({
        device: 'fridge-1',
        ts: '2026-01-05T10:00:00Z',
        measurements: [
          { type: 'temperature', value: 4.5 },
          { type: 'humidity', value: 41 },
          { type: 'temperature', value: 6.1, label: 'door' },
        ],
      });
      expect(answer.status).toBe(200);
      expect(answer.json).toEqual({
        accepted: 3,
        deduplicated: 0,
        channels: [
          { type: 'temperature', label: null, channel_id: expect.stringMatching(/^chn_/) },
          { type: 'humidity', label: null, channel_id: expect.stringMatching(/^chn_/) },
          { type: 'temperature', label: 'door', channel_id: expect.stringMatching(/^chn_/) },
        ],
      });
      const sensors = await sensorsOf();
      expect(sensors).toHaveLength(3);
      const byKey = Object.fromEntries(sensors.map((s: any) => [`${s.kind}/${s.label}`, s]));
      // pharma: temperature 2..8 °C grace 15, humidity 0..60 % grace 30
      expect(byKey['temperature/null']).toMatchObject({
        unit: '°C',
        ok_min: 2,
        ok_max: 8,
        grace_min: 15,
        rule_enabled: true,
      });
      expect(byKey['humidity/null']).toMatchObject({
        unit: '%',
        ok_min: 0,
        ok_max: 60,
        grace_min: 30,
        rule_enabled: true,
      });
      expect(byKey['temperature/door']).toMatchObject({
        last_value: 6.1,
        last_ts: '2026-01-05T10:00:00.000000Z',
      });
      expect(answer.json.channels[0].channel_id).toBe(byKey['temperature/null'].channel_id);
      expect(await measurementCount(t)).toBe(3);
    });

    it('reuses the channels on the next request and moves the last value forward, never back for late data', async () => {
      await ingest({
        device: 'fridge-1',
        ts: '2026-01-05T10:05:00Z',
        measurements: [{ type: 'temperature', value: 5 }],
      });
      const late = await ingest({
        device: 'fridge-1',
        ts: '2026-01-05T10:00:00Z',
        measurements: [{ type: 'temperature', value: 3 }],
      });
      expect(late.json.accepted).toBe(1);
      const [sensor] = await sensorsOf();
      expect(sensor).toMatchObject({ last_value: 5, last_ts: '2026-01-05T10:05:00.000000Z' });
      expect(await sensorsOf()).toHaveLength(1);
    });

    it('stores every value exactly as sent, to the last bit', async () => {
      const values = [21 + 1 / 3, 0.30000000000000004, -12.000000000000002, 1e-7];
      const answer = await ingest({
        device: 'fridge-1',
        ts: '2026-01-05T10:00:00Z',
        measurements: values.map((value, i) => ({
          type: 'humidity',
          value: Math.abs(value),
          label: `l${i}`,
        })),
      });
      expect(answer.json.accepted).toBe(4);
      const byLabel = Object.fromEntries((await sensorsOf()).map((s: any) => [s.label, s.last_value]));
      expect(values.map((_v, i) => byLabel[`l${i}`])).toEqual(values.map((v) => Math.abs(v)));
    });

    it('stamps the server receive time when ts is absent, with microseconds', async () => {
      const before = Date.now();
      expect(
        (await ingest({ device: 'fridge-1', measurements: [{ type: 'temperature', value: 4 }] })).status,
      ).toBe(200);
      const [sensor] = await sensorsOf();
      expect(sensor.last_ts).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
      expect(Date.parse(sensor.last_ts)).toBeGreaterThanOrEqual(before - 1);
      expect(Date.parse(sensor.last_ts)).toBeLessThanOrEqual(Date.now());
    });

    it('accepts any offset and emits UTC with microseconds', async () => {
      await ingest({
        device: 'fridge-1',
        ts: '2026-01-05T11:00:00.123456+01:00',
        measurements: [{ type: 'temperature', value: 4 }],
      });
      expect((await sensorsOf())[0].last_ts).toBe('2026-01-05T10:00:00.123456Z');
    });

    it('rejects a ts without offset, before 2000 or more than a day ahead with 400 invalid_request', async () => {
      for (const ts of [
        '2026-01-05T10:00:00',
        '1970-01-01T00:00:00Z',
        new Date(Date.now() + 2 * 86400e3).toISOString(),
        'yesterday',
      ]) {
        const answer = await ingest({
          device: 'fridge-1',
          ts,
          measurements: [{ type: 'temperature', value: 4 }],
        });
        expect([ts, answer.status, answer.json.error.code]).toEqual([ts, 400, 'invalid_request']);
      }
      expect(await measurementCount(t)).toBe(0);
    });

    it('makes retries safe: the same body again is deduplicated, no second row', async () => {
      const body = {
        device: 'fridge-1',
        ts: '2026-01-05T10:00:00Z',
        measurements: [
          { type: 'temperature', value: 4 },
          { type: 'humidity', value: 40 },
        ],
      };
      expect((await ingest(body)).json).toMatchObject({ accepted: 2, deduplicated: 0 });
      expect((await ingest(body)).json).toMatchObject({ accepted: 0, deduplicated: 2 });
      expect(await measurementCount(t)).toBe(2);
      // a resend with one more reading: only the new one is written, and counted once in the rollups
      const more = { ...body, measurements: [...body.measurements, { type: 'pressure', value: 1013 }] };
      expect((await ingest(more)).json).toMatchObject({ accepted: 1, deduplicated: 2 });
      expect(await measurementCount(t)).toBe(3);
      await t.cloud.services.ingest.catchUp();
      const counted = await t.cloud.services.db
        .selectFrom('measurement_rollups')
        .select(({ fn }) => fn.sum<number>('n').as('n'))
        .where('res', '=', 3600)
        .executeTakeFirstOrThrow();
      expect(Number(counted.n)).toBe(3);
    });

    it('dedups on (device, ts, channel): the same channel twice in one request stores the first', async () => {
      const answer = await ingest({
        device: 'fridge-1',
        ts: '2026-01-05T10:00:00Z',
        measurements: [
          { type: 'temperature', value: 4 },
          { type: 'temperature', value: 9 },
        ],
      });
      expect(answer.json).toMatchObject({ accepted: 1, deduplicated: 1 });
      expect(answer.json.channels).toHaveLength(1);
      expect((await sensorsOf())[0].last_value).toBe(4);
    });

    it('replays the cached answer for an Idempotency-Key and refuses the key with another body', async () => {
      const body = {
        device: 'fridge-1',
        ts: '2026-01-05T10:00:00Z',
        measurements: [{ type: 'temperature', value: 4 }],
      };
      const first = await ingest(body, { 'Idempotency-Key': 'k-1' });
      expect(first.status).toBe(200);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      const replay = await ingest(body, { 'Idempotency-Key': 'k-1' });
      expect(replay.status).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.json).toEqual(first.json); // the cached answer, not "deduplicated: 1"
      const other = await ingest(
        { ...body, measurements: [{ type: 'temperature', value: 5 }] },
        { 'Idempotency-Key': 'k-1' },
      );
      expect(other.status).toBe(409);
      expect(other.json.error.code).toBe('idempotency_conflict');
      expect(await measurementCount(t)).toBe(1);
    });

    it('takes the device from X-Device-Id over the body', async () => {
      const answer = await ingest(
        { device: 'someone-else', measurements: [{ type: 'temperature', value: 4 }] },
        { 'X-Device-Id': 'fridge-1' },
      );
      expect(answer.status).toBe(200);
      const refused = await ingest(
        { device: 'fridge-1', measurements: [{ type: 'temperature', value: 4 }] },
        { 'X-Device-Id': 'other' },
      );
      expect(refused.status).toBe(403);
      expect(refused.json.error.code).toBe('device_not_in_token');
    });

    it('honours the unit override and reads battery in volts only with unit V', async () => {
      const answer = await ingest({
        device: 'fridge-1',
        measurements: [
          { type: 'battery', value: 3.1, unit: 'V', label: 'cell' },
          { type: 'battery', value: 88 },
          { type: 'temperature', value: 40, unit: '°F' },
        ],
      });
      expect(answer.status).toBe(200);
      const byLabel = Object.fromEntries((await sensorsOf()).map((s: any) => [`${s.kind}/${s.label}`, s]));
      expect(byLabel['battery/cell']).toMatchObject({ unit: 'V', ok_min: 3, ok_max: 60 });
      expect(byLabel['battery/null']).toMatchObject({ unit: '%', ok_min: 20, ok_max: 100, grace_min: 60 });
      expect(byLabel['temperature/null'].unit).toBe('°F');
      for (const m of [
        { type: 'battery', value: 0.2, unit: 'V' },
        { type: 'battery', value: 61, unit: 'V' },
        { type: 'battery', value: 101 },
      ]) {
        const refused = await ingest({ device: 'fridge-1', measurements: [m] });
        expect([m, refused.status, refused.json.error.code]).toEqual([m, 422, 'out_of_range']);
      }
    });

    it('marks the device online and updates last_seen_at', async () => {
      const before = (await t.http.get(`/v1/devices/${device.id}`, { token: user.token })).json;
      expect(before).toMatchObject({ online: false, last_seen_at: null });
      await ingest({
        device: 'fridge-1',
        ts: '2026-01-05T10:00:00Z',
        measurements: [{ type: 'temperature', value: 4 }],
      });
      const after = (await t.http.get(`/v1/devices/${device.id}`, { token: user.token })).json;
      expect(after.online).toBe(true);
      expect(Math.abs(Date.parse(after.last_seen_at) - Date.now())).toBeLessThan(60_000);
    });

    it('accepts exactly 32 measurements', async () => {
      const measurements = Array.from({ length: 32 }, (_, i) => ({
        type: 'temperature',
        value: i,
        label: `probe-${i}`,
      }));
      const answer = await ingest({ device: 'fridge-1', measurements });
      expect(answer.status).toBe(200);
      expect(answer.json.accepted).toBe(32);
      expect(answer.json.channels).toHaveLength(32);
    });
  });

  it('refuses with 400 a time older than RETENTION_DAYS keeps, on every way in, rather than accept what retention removes', async () => {
    const clock = new ManualClock(Date.UTC(2026, 2, 10, 12) * 1000);
    await start({ RETENTION_DAYS: '30' }, clock);
    const old = '2026-02-07T23:59:59Z'; // the cutoff is 30 days back, rounded down to a UTC day
    const answer = await ingest({
      device: 'fridge-1',
      ts: old,
      measurements: [{ type: 'temperature', value: 4 }],
    });
    expect([answer.status, answer.json.error.code]).toEqual([400, 'invalid_request']);
    expect(answer.json.error.details).toEqual([
      { path: 'ts', message: expect.stringContaining('30 days (RETENTION_DAYS)') },
    ]);
    const shelly = await t.http.get(
      `/v1/ingest/shelly?token=${device.ingest_token}&device=fridge-1&ts=${encodeURIComponent(old)}&temp=4`,
    );
    expect([shelly.status, shelly.json.error.code]).toEqual([400, 'invalid_request']);
    expect(shelly.json.error.message).toContain('RETENTION_DAYS');
    expect(await measurementCount(t)).toBe(0);
    const kept = await ingest({
      device: 'fridge-1',
      ts: '2026-02-08T00:00:00Z',
      measurements: [{ type: 'temperature', value: 4 }],
    });
    expect([kept.status, kept.json.accepted]).toEqual([200, 1]);
    expect(await t.cloud.services.retention.run()).toMatchObject({ deleted: 0 });
    expect(await measurementCount(t)).toBe(1);
  });

  describe('refusing data', () => {
    beforeEach(async () => start());

    const cases: [string, unknown, number, string][] = [
      ['measurements empty', { device: 'fridge-1', measurements: [] }, 400, 'no_measurements'],
      ['measurements missing', { device: 'fridge-1' }, 400, 'no_measurements'],
      [
        'measurements not an array',
        { device: 'fridge-1', measurements: { type: 'temperature', value: 1 } },
        400,
        'invalid_measurement',
      ],
      [
        '33 measurements',
        { device: 'fridge-1', measurements: Array.from({ length: 33 }, () => ({ type: 'co2', value: 400 })) },
        400,
        'invalid_measurement',
      ],
      [
        'a measurement that is not an object',
        { device: 'fridge-1', measurements: [5] },
        400,
        'invalid_measurement',
      ],
      [
        'a measurement without value',
        { device: 'fridge-1', measurements: [{ type: 'temperature' }] },
        400,
        'invalid_measurement',
      ],
      [
        'a measurement without type',
        { device: 'fridge-1', measurements: [{ value: 4 }] },
        400,
        'invalid_measurement',
      ],
      [
        'a value that is a string',
        { device: 'fridge-1', measurements: [{ type: 'temperature', value: '4' }] },
        400,
        'invalid_measurement',
      ],
      [
        'a label over 64 characters',
        { device: 'fridge-1', measurements: [{ type: 'temperature', value: 4, label: 'x'.repeat(65) }] },
        400,
        'invalid_measurement',
      ],
      [
        'a unit that is not a string',
        { device: 'fridge-1', measurements: [{ type: 'temperature', value: 4, unit: 5 }] },
        400,
        'invalid_measurement',
      ],
      [
        'an unknown type',
        { device: 'fridge-1', measurements: [{ type: 'radiation', value: 4 }] },
        422,
        'unknown_kind',
      ],
      [
        'a temperature above 200 °C',
        { device: 'fridge-1', measurements: [{ type: 'temperature', value: 200.1 }] },
        422,
        'out_of_range',
      ],
      [
        'a humidity below 0',
        { device: 'fridge-1', measurements: [{ type: 'humidity', value: -1 }] },
        422,
        'out_of_range',
      ],
      [
        'a leak that is neither 0 nor 1',
        { device: 'fridge-1', measurements: [{ type: 'leak', value: 0.5 }] },
        422,
        'out_of_range',
      ],
      [
        'a signal above 0 dBm',
        { device: 'fridge-1', measurements: [{ type: 'signal', value: 3 }] },
        422,
        'out_of_range',
      ],
      ['no device', { measurements: [{ type: 'temperature', value: 4 }] }, 400, 'invalid_request'],
      ['a body that is an array', [{ type: 'temperature', value: 4 }], 400, 'invalid_request'],
    ];

    it.each(
      cases.map(([what, body, status, code]) => [`${what}: ${status} ${code}`, body, status, code] as const),
    )('refuses %s, storing nothing', async (_what, body, status, code) => {
      const answer = await ingest(body);
      expect(answer.status).toBe(status);
      expect(answer.json.error).toMatchObject({ code, request_id: answer.headers.get('x-request-id') });
      expect(await measurementCount(t)).toBe(0);
    });

    it('rejects the whole request when one measurement is invalid; the first failing measurement wins', async () => {
      const answer = await ingest({
        device: 'fridge-1',
        ts: '2026-01-05T10:00:00Z',
        measurements: [
          { type: 'temperature', value: 4 },
          { type: 'temperature', value: 999 },
          { type: 'gravity', value: 1 },
        ],
      });
      expect(answer.status).toBe(422);
      expect(answer.json.error.code).toBe('out_of_range');
      expect(answer.json.error.details).toEqual([
        { path: 'measurements[1].value', message: expect.any(String) },
      ]);
      expect(await measurementCount(t)).toBe(0);
      expect(await sensorsOf()).toEqual([]);
      // nothing was clamped or half-stored: the valid one is new when sent alone
      expect(
        (
          await ingest({
            device: 'fridge-1',
            ts: '2026-01-05T10:00:00Z',
            measurements: [{ type: 'temperature', value: 4 }],
          })
        ).json.accepted,
      ).toBe(1);
    });

    it('answers 400 bad_json to a body that is not JSON', async () => {
      const answer = await t.http.post('/v1/ingest', undefined, {
        token: device.ingest_token,
        raw: '{"device": "fridge-1", "measurements": [',
        headers: { 'content-type': 'application/json' },
      });
      expect(answer.status).toBe(400);
      expect(answer.json.error.code).toBe('bad_json');
    });

    it('answers 401 token_invalid without a token, with a wrong one, and before judging the body', async () => {
      const body = { device: 'fridge-1', measurements: [{ type: 'temperature', value: 4 }] };
      const missing = await t.http.post('/v1/ingest', body);
      expect(missing.status).toBe(401);
      expect(missing.json.error.code).toBe('token_invalid');
      const wrong = await ingest(body, {}, 'ds_live_wrong');
      expect([wrong.status, wrong.json.error.code]).toEqual([401, 'token_invalid']);
      const both = await t.http.post('/v1/ingest', undefined, { token: 'ds_live_wrong', raw: 'not json' });
      expect([both.status, both.json.error.code]).toEqual([401, 'token_invalid']);
    });

    it('answers 403 device_not_in_token for another device, existing or not, before judging the body', async () => {
      await createDevice(t, user.token, siteId, { local_id: 'fridge-2' });
      for (const other of ['fridge-2', 'no-such-device']) {
        const answer = await ingest({ device: other, measurements: [{ type: 'radiation', value: 1 }] });
        expect([answer.status, answer.json.error.code]).toEqual([403, 'device_not_in_token']);
      }
    });

    it('answers 403 forbidden to a user token', async () => {
      const answer = await ingest(
        { device: 'fridge-1', measurements: [{ type: 'temperature', value: 4 }] },
        {},
        user.token,
      );
      expect([answer.status, answer.json.error.code]).toEqual([403, 'forbidden']);
    });

    it('refuses the old token at once after rotation, and any token of a deleted device', async () => {
      const body = { device: 'fridge-1', measurements: [{ type: 'temperature', value: 4 }] };
      const rotated = await t.http.post(`/v1/devices/${device.id}/rotate-token`, undefined, {
        token: user.token,
      });
      const old = await ingest(body);
      expect([old.status, old.json.error.code]).toEqual([401, 'token_invalid']);
      expect((await ingest(body, {}, rotated.json.ingest_token)).status).toBe(200);
      expect((await t.http.delete(`/v1/devices/${device.id}`, { token: user.token })).status).toBe(204);
      expect((await ingest(body, {}, rotated.json.ingest_token)).status).toBe(401);
    });
  });

  describe('rate limit', () => {
    it('allows 60 requests a minute per device by default and says so in the headers', async () => {
      await start();
      const answer = await ingest({ device: 'fridge-1', measurements: [{ type: 'temperature', value: 4 }] });
      expect(answer.headers.get('x-ratelimit-device')).toBe('60');
      expect(answer.headers.get('x-ratelimit-remaining')).toBe('59');
      const reset = Number(answer.headers.get('x-ratelimit-reset'));
      expect(reset % 60).toBe(0);
      expect(reset * 1000).toBeGreaterThan(Date.now() - 1000);
    });

    it('answers 429 rate_limited with Retry-After past the limit, stores nothing, and counts per device', async () => {
      await start({ RATE_LIMIT_INGEST_PER_MIN: '3' }, midMinute());
      const other = await createDevice(t, user.token, siteId, { local_id: 'fridge-2' });
      const body = (ts: number) => ({
        device: 'fridge-1',
        ts: new Date(Date.UTC(2026, 0, 5, 10, ts)).toISOString(),
        measurements: [{ type: 'temperature', value: 4 }],
      });
      for (let i = 0; i < 3; i++) expect((await ingest(body(i))).status).toBe(200);
      const limited = await ingest(body(3));
      expect(limited.status).toBe(429);
      expect(limited.json.error.code).toBe('rate_limited');
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(await measurementCount(t)).toBe(3);
      const fresh = await ingest(
        { device: 'fridge-2', measurements: [{ type: 'temperature', value: 4 }] },
        {},
        other.ingest_token,
      );
      expect(fresh.status).toBe(200);
    });

    it('shares the counter between two processes on one database', async () => {
      const clock = midMinute();
      await start({ RATE_LIMIT_INGEST_PER_MIN: '4' }, clock);
      const second = await startTestCloud({
        sameDatabaseAs: t,
        env: { RATE_LIMIT_INGEST_PER_MIN: '4' },
        clock,
      });
      try {
        const body = { device: 'fridge-1', measurements: [{ type: 'temperature', value: 4 }] };
        const statuses = [];
        for (let i = 0; i < 6; i++) {
          const via = i % 2 === 0 ? t.http : second.http;
          statuses.push((await via.post('/v1/ingest', body, { token: device.ingest_token })).status);
        }
        expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
      } finally {
        await second.stop();
      }
    });

    it('serves the request past the limit in warn mode', async () => {
      await start({ RATE_LIMIT_INGEST_PER_MIN: '1', RATE_LIMIT_MODE: 'warn' });
      for (let i = 0; i < 3; i++) {
        expect(
          (await ingest({ device: 'fridge-1', measurements: [{ type: 'temperature', value: 4 }] })).status,
        ).toBe(200);
      }
      expect(t.logs.some((l) => String(l.msg).includes('rate limit exceeded'))).toBe(true);
    });
  });

  describe('under concurrency', () => {
    it('answers every request of many concurrent senders and stores each measurement once', async () => {
      // On PostgreSQL the requests wait for the writers: a stall of the test's process as long as
      // INGEST_MAX_WAIT_MS (2 s) would have admission control shed some with 503.
      await start({ RATE_LIMIT_INGEST_PER_MIN: '100000', INGEST_MAX_WAIT_MS: '600000' });
      const devices = [
        device,
        ...(await Promise.all(
          [2, 3, 4].map((n) => createDevice(t, user.token, siteId, { local_id: `fridge-${n}` })),
        )),
      ];
      const requests = devices.flatMap((d) =>
        Array.from({ length: 50 }, (_, i) =>
          t.http.post(
            '/v1/ingest',
            {
              device: d.local_id,
              ts: new Date(Date.UTC(2026, 0, 5, 10, 0, i)).toISOString(),
              measurements: [
                { type: 'temperature', value: 4 },
                { type: 'humidity', value: 50 },
              ],
            },
            { token: d.ingest_token },
          ),
        ),
      );
      // the same requests again, concurrently with the first ones: each key is written once
      const answers = await Promise.all([
        ...requests,
        ...devices.map((d) =>
          t.http.post(
            '/v1/ingest',
            {
              device: d.local_id,
              ts: '2026-01-05T10:00:00Z',
              measurements: [{ type: 'temperature', value: 4 }],
            },
            { token: d.ingest_token },
          ),
        ),
      ]);
      expect(answers.every((a) => a.status === 200)).toBe(true);
      const accepted = answers.reduce((n, a) => n + a.json.accepted, 0);
      const deduplicated = answers.reduce((n, a) => n + a.json.deduplicated, 0);
      expect(accepted).toBe(400);
      expect(deduplicated).toBe(4);
      expect(await measurementCount(t)).toBe(400);
      // one channel per (device, type) however many requests raced to create it
      const sensors = await t.cloud.services.db.selectFrom('sensors').select('id').execute();
      expect(sensors).toHaveLength(8);
    });
  });
});
