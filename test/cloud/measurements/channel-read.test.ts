import { afterEach, describe, expect, it } from '@jest/globals';
import { parse } from 'csv-parse/sync';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { formatMicros } from '../../../shared/time.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite, type CreatedDevice } from '../../helpers/fixtures.ts';
import { at, ingestCore, ingestHttp, readAll, READ_ENV, type Reading } from './reads-helpers.ts';

const NOW = at('2026-03-10T12:00:00Z');
const MINUTE = 60_000_000;

describe.each(DATABASES)('GET /v1/channels/{id}/measurements on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let device: CreatedDevice;
  let clock: ManualClock;
  afterEach(async () => t?.stop());

  async function start(env: Record<string, string> = {}): Promise<void> {
    clock = new ManualClock(NOW);
    t = await startTestCloud({ db, clock, env: { ...READ_ENV, ...env } });
    user = await signUp(t, 'reader@example.com');
    const site = await createSite(t, user.token);
    device = await createDevice(t, user.token, site.id, { local_id: 'fridge-1' });
  }

  const get = (path: string) => t.http.get(path, { token: user.token });
  const series = (answer: { json: { data: { ts: string; value: number }[] } }) =>
    answer.json.data.map((p) => [p.ts, p.value]);

  describe('raw points', () => {
    it('answers the last 24 hours by default, oldest first, ts with microseconds, to exclusive', async () => {
      await start();
      const chn = await ingestHttp(t, device, [
        { ts: NOW - 24 * 60 * MINUTE - 1, value: 1 }, // just before the default from
        { ts: NOW - 24 * 60 * MINUTE, value: 2 }, // exactly from: included
        { ts: NOW - 5 * MINUTE + 123_456, value: 3.25 },
        { ts: NOW, value: 4 }, // exactly to: excluded
      ]);
      const answer = await get(`/v1/channels/${chn}/measurements`);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('x-ratelimit-read')).toBe('100000');
      expect(answer.json).toEqual({
        data: [
          { ts: '2026-03-09T12:00:00.000000Z', value: 2 },
          { ts: '2026-03-10T11:55:00.123456Z', value: 3.25 },
        ],
        next_cursor: null,
        has_more: false,
      });
    });

    it('takes from and to with any offset, from inclusive and to exclusive', async () => {
      await start();
      const chn = await ingestHttp(t, device, [
        { ts: at('2026-01-05T09:59:59.999999Z'), value: 1 },
        { ts: at('2026-01-05T10:00:00Z'), value: 2 },
        { ts: at('2026-01-05T10:30:00Z'), value: 3 },
        { ts: at('2026-01-05T11:00:00Z'), value: 4 },
      ]);
      const from = encodeURIComponent('2026-01-05T11:00:00+01:00');
      const to = encodeURIComponent('2026-01-05T06:00:00-05:00');
      const answer = await get(`/v1/channels/${chn}/measurements?from=${from}&to=${to}`);
      expect(series(answer)).toEqual([
        ['2026-01-05T10:00:00.000000Z', 2],
        ['2026-01-05T10:30:00.000000Z', 3],
      ]);
    });

    it('pages with limit and next_cursor until has_more is false, with no trailing empty page', async () => {
      await start();
      const readings = Array.from({ length: 7 }, (_, i) => ({ ts: NOW - (10 - i) * MINUTE, value: i }));
      const chn = await ingestHttp(t, device, readings);
      const first = await get(`/v1/channels/${chn}/measurements?limit=3`);
      expect(first.json.data).toHaveLength(3);
      expect(first.json.has_more).toBe(true);
      const all = await readAll(t, user.token, `/v1/channels/${chn}/measurements?limit=3`);
      expect(all.pages).toBe(3);
      expect(all.points.map((p) => p.value)).toEqual([0, 1, 2, 3, 4, 5, 6]);
      const exact = await readAll(t, user.token, `/v1/channels/${chn}/measurements?limit=7`);
      expect(exact.pages).toBe(1);
    });
  });

  describe('aggregated points', () => {
    it('aligns buckets of every agg to UTC epoch multiples, stamps their start and omits empty ones', async () => {
      await start();
      const chn = await ingestHttp(t, device, [
        { ts: at('2026-01-05T05:59:59Z'), value: 1 },
        { ts: at('2026-01-05T06:00:00Z'), value: 2 },
        { ts: at('2026-01-05T06:04:00Z'), value: 3 },
        { ts: at('2026-01-05T06:14:30Z'), value: 4 },
        { ts: at('2026-01-05T07:00:00Z'), value: 5 },
        { ts: at('2026-01-06T00:00:00Z'), value: 6 },
      ]);
      const range = `from=${encodeURIComponent('2026-01-04T00:00:00Z')}&to=${encodeURIComponent('2026-01-07T00:00:00Z')}`;
      const read = async (agg: string) =>
        series(await get(`/v1/channels/${chn}/measurements?agg=${agg}&fn=count&${range}`));
      expect(await read('1m')).toEqual([
        ['2026-01-05T05:59:00.000000Z', 1],
        ['2026-01-05T06:00:00.000000Z', 1],
        ['2026-01-05T06:04:00.000000Z', 1],
        ['2026-01-05T06:14:00.000000Z', 1],
        ['2026-01-05T07:00:00.000000Z', 1],
        ['2026-01-06T00:00:00.000000Z', 1],
      ]);
      expect(await read('5m')).toEqual([
        ['2026-01-05T05:55:00.000000Z', 1],
        ['2026-01-05T06:00:00.000000Z', 2],
        ['2026-01-05T06:10:00.000000Z', 1],
        ['2026-01-05T07:00:00.000000Z', 1],
        ['2026-01-06T00:00:00.000000Z', 1],
      ]);
      expect(await read('15m')).toEqual([
        ['2026-01-05T05:45:00.000000Z', 1],
        ['2026-01-05T06:00:00.000000Z', 3],
        ['2026-01-05T07:00:00.000000Z', 1],
        ['2026-01-06T00:00:00.000000Z', 1],
      ]);
      expect(await read('1h')).toEqual([
        ['2026-01-05T05:00:00.000000Z', 1],
        ['2026-01-05T06:00:00.000000Z', 3],
        ['2026-01-05T07:00:00.000000Z', 1],
        ['2026-01-06T00:00:00.000000Z', 1],
      ]);
      expect(await read('6h')).toEqual([
        ['2026-01-05T00:00:00.000000Z', 1],
        ['2026-01-05T06:00:00.000000Z', 4],
        ['2026-01-06T00:00:00.000000Z', 1],
      ]);
      expect(await read('1d')).toEqual([
        ['2026-01-05T00:00:00.000000Z', 5],
        ['2026-01-06T00:00:00.000000Z', 1],
      ]);
    });

    it('evaluates each fn: mean, min, max, first, last, count, sum (mean is the default)', async () => {
      await start();
      const chn = await ingestHttp(t, device, [
        { ts: at('2026-01-05T10:10:00Z'), value: 4 },
        { ts: at('2026-01-05T10:20:00Z'), value: -2.5 },
        { ts: at('2026-01-05T10:30:00Z'), value: 7 },
        { ts: at('2026-01-05T10:40:00Z'), value: 1.5 },
        { ts: at('2026-01-05T11:05:00Z'), value: 9 },
      ]);
      const range = `from=${encodeURIComponent('2026-01-05T00:00:00Z')}&to=${encodeURIComponent('2026-01-06T00:00:00Z')}`;
      const read = async (fn: string | null) =>
        series(await get(`/v1/channels/${chn}/measurements?agg=1h&${fn ? `fn=${fn}&` : ''}${range}`)).map(
          ([, v]) => v,
        );
      expect(await read(null)).toEqual([2.5, 9]);
      expect(await read('mean')).toEqual([2.5, 9]);
      expect(await read('min')).toEqual([-2.5, 9]);
      expect(await read('max')).toEqual([7, 9]);
      expect(await read('first')).toEqual([4, 9]);
      expect(await read('last')).toEqual([1.5, 9]);
      expect(await read('count')).toEqual([4, 1]);
      expect(await read('sum')).toEqual([10, 9]);
    });

    it('folds late and duplicate readings into the bucket they belong to', async () => {
      await start();
      const chn = await ingestHttp(t, device, [
        { ts: at('2026-01-05T10:05:00Z'), value: 5 },
        { ts: at('2026-01-05T10:20:00Z'), value: 20 },
        { ts: at('2026-01-05T11:00:00Z'), value: 60 },
      ]);
      // Late: older than what is stored, first of its hour; and a retry of 10:05 with another value.
      await ingestHttp(t, device, [
        { ts: at('2026-01-05T10:01:00Z'), value: 1 },
        { ts: at('2026-01-05T10:05:00Z'), value: 99 },
        { ts: at('2026-01-05T10:59:59.5Z'), value: 59 },
      ]);
      const range = `from=${encodeURIComponent('2026-01-05T00:00:00Z')}&to=${encodeURIComponent('2026-01-06T00:00:00Z')}`;
      const read = async (fn: string) =>
        series(await get(`/v1/channels/${chn}/measurements?agg=1h&fn=${fn}&${range}`));
      expect(await read('count')).toEqual([
        ['2026-01-05T10:00:00.000000Z', 4],
        ['2026-01-05T11:00:00.000000Z', 1],
      ]);
      expect(await read('first')).toEqual([
        ['2026-01-05T10:00:00.000000Z', 1],
        ['2026-01-05T11:00:00.000000Z', 60],
      ]);
      expect(await read('last')).toEqual([
        ['2026-01-05T10:00:00.000000Z', 59],
        ['2026-01-05T11:00:00.000000Z', 60],
      ]);
      expect((await read('sum'))[0]).toEqual(['2026-01-05T10:00:00.000000Z', 85]);
      expect((await read('max'))[0]).toEqual(['2026-01-05T10:00:00.000000Z', 59]);
      const day = series(await get(`/v1/channels/${chn}/measurements?agg=1d&fn=mean&${range}`));
      expect(day).toEqual([['2026-01-05T00:00:00.000000Z', 145 / 5]]);
    });

    it('counts only the part of an edge bucket inside [from, to), still stamped with the bucket start', async () => {
      await start();
      const chn = await ingestHttp(t, device, [
        { ts: at('2026-01-05T10:07:29Z'), value: 1 },
        { ts: at('2026-01-05T10:07:30Z'), value: 2 },
        { ts: at('2026-01-05T10:30:00Z'), value: 3 },
        { ts: at('2026-01-05T12:15:00Z'), value: 4 },
        { ts: at('2026-01-05T12:15:01Z'), value: 5 },
      ]);
      const from = encodeURIComponent('2026-01-05T10:07:30Z');
      const to = encodeURIComponent('2026-01-05T12:15:01Z');
      const answer = await get(`/v1/channels/${chn}/measurements?agg=1d&fn=count&from=${from}&to=${to}`);
      expect(series(answer)).toEqual([['2026-01-05T00:00:00.000000Z', 3]]);
      const hours = await get(`/v1/channels/${chn}/measurements?agg=1h&fn=sum&from=${from}&to=${to}`);
      expect(series(hours)).toEqual([
        ['2026-01-05T10:00:00.000000Z', 5],
        ['2026-01-05T12:00:00.000000Z', 4],
      ]);
    });

    it('pages aggregated buckets with next_cursor across long empty stretches', async () => {
      await start();
      const readings: Reading[] = [];
      for (let d = 0; d < 9; d++)
        readings.push({ ts: at('2025-06-01T00:00:00Z') + d * 30 * 1440 * MINUTE, value: d });
      const chn = await ingestHttp(t, device, readings);
      const range = `from=${encodeURIComponent('2025-01-01T00:00:00Z')}&to=${encodeURIComponent('2026-03-01T00:00:00Z')}`;
      const all = await readAll(
        t,
        user.token,
        `/v1/channels/${chn}/measurements?agg=1h&fn=last&limit=4&${range}`,
      );
      expect(all.pages).toBe(3);
      expect(all.points.map((p) => p.value)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
      expect(all.points[1]!.ts).toBe(formatMicros(readings[1]!.ts));
    });
  });

  describe('format=csv', () => {
    it('streams every point of the range as text/csv ts,value, more than one page holds', async () => {
      await start();
      const readings = Array.from({ length: 1234 }, (_, i) => ({
        ts: NOW - (2000 - i) * MINUTE + 7,
        value: i / 4,
      }));
      const { channelId } = await ingestCore(t, device, readings);
      const answer = await get(`/v1/channels/${channelId}/measurements?format=csv`);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('content-type')).toBe('text/csv; charset=utf-8');
      const rows = parse<{ ts: string; value: string }>(answer.text, { columns: true });
      const inRange = readings.filter((r) => r.ts >= NOW - 1440 * MINUTE);
      expect(rows).toHaveLength(inRange.length);
      expect(rows.map((r) => [r.ts, Number(r.value)])).toEqual(
        inRange.map((r) => [formatMicros(r.ts), r.value]),
      );
      expect(answer.text.split('\n')[0]).toBe('ts,value');
    });

    it('streams aggregated buckets the same way', async () => {
      await start();
      const readings = Array.from({ length: 600 }, (_, i) => ({ ts: NOW - (600 - i) * MINUTE, value: i }));
      const { channelId } = await ingestCore(t, device, readings);
      const answer = await get(`/v1/channels/${channelId}/measurements?format=csv&agg=1h&fn=max`);
      const rows = parse<{ ts: string; value: string }>(answer.text, { columns: true });
      expect(rows).toEqual(
        Array.from({ length: 10 }, (_, h) => ({
          ts: formatMicros(NOW - (10 - h) * 60 * MINUTE),
          value: String(h * 60 + 59),
        })),
      );
    });
  });

  describe('errors', () => {
    it('answers 404 channel_not_found for an unknown channel or one of another account', async () => {
      await start();
      const chn = await ingestHttp(t, device, [{ ts: NOW - MINUTE, value: 1 }]);
      const unknown = await get('/v1/channels/chn_doesnotexist/measurements');
      expect(unknown.status).toBe(404);
      expect(unknown.json.error).toEqual({
        code: 'channel_not_found',
        message: expect.any(String),
        request_id: unknown.headers.get('x-request-id'),
      });
      const other = await signUp(t, 'other@example.com');
      const foreign = await t.http.get(`/v1/channels/${chn}/measurements?agg=nope`, { token: other.token });
      expect(foreign.status).toBe(404);
      expect(foreign.json.error.code).toBe('channel_not_found');
    });

    it('answers 400 invalid_request or 422 invalid_range for bad query parameters', async () => {
      await start();
      const chn = await ingestHttp(t, device, [{ ts: NOW - MINUTE, value: 1 }]);
      const other = await ingestHttp(t, device, [{ ts: NOW - MINUTE, value: 1 }], { label: 'door' });
      const cursorOfOther = (await get(`/v1/channels/${other}/measurements?limit=1`)).json;
      expect(cursorOfOther.has_more).toBe(false);
      const foreignCursor = Buffer.from(JSON.stringify([NOW - MINUTE, other])).toString('base64url');
      const cases: [string, number, string, string][] = [
        ['agg=2h', 400, 'invalid_request', 'agg'],
        ['agg=1h&fn=median', 400, 'invalid_request', 'fn'],
        ['fn=max', 400, 'invalid_request', 'fn'],
        ['from=yesterday', 400, 'invalid_request', 'from'],
        ['to=2026-03-10T10:00:00', 400, 'invalid_request', 'to'],
        ['limit=0', 400, 'invalid_request', 'limit'],
        ['limit=501', 400, 'invalid_request', 'limit'],
        ['limit=ten', 400, 'invalid_request', 'limit'],
        ['cursor=garbage', 400, 'invalid_request', 'cursor'],
        [`cursor=${foreignCursor}`, 400, 'invalid_request', 'cursor'],
        ['format=xml', 400, 'invalid_request', 'format'],
        ['format=csv&limit=10', 400, 'invalid_request', 'limit'],
        [
          `from=${encodeURIComponent('2026-03-10T10:00:00Z')}&to=${encodeURIComponent('2026-03-10T10:00:00Z')}`,
          422,
          'invalid_range',
          'to',
        ],
        [
          `from=${encodeURIComponent('2026-03-10T11:00:00Z')}&to=${encodeURIComponent('2026-03-10T10:00:00Z')}`,
          422,
          'invalid_range',
          'to',
        ],
      ];
      for (const [query, status, code, path] of cases) {
        const answer = await get(`/v1/channels/${chn}/measurements?${query}`);
        expect([query, answer.status, answer.json.error.code]).toEqual([query, status, code]);
        expect(answer.json.error.details?.[0]?.path ?? path).toBe(path);
      }
    });

    it('limits reads to the read family rate, 429 rate_limited with Retry-After beyond it', async () => {
      await start({ RATE_LIMIT_READ_PER_MIN: '3' });
      const chn = await ingestHttp(t, device, [{ ts: NOW - MINUTE, value: 1 }]);
      for (let i = 0; i < 3; i++) {
        const ok = await get(`/v1/channels/${chn}/measurements`);
        expect(ok.status).toBe(200);
        expect(ok.headers.get('x-ratelimit-read')).toBe('3');
        expect(ok.headers.get('x-ratelimit-remaining')).toBe(String(2 - i));
      }
      const limited = await get(`/v1/measurements?channel_ids=${chn}`);
      expect(limited.status).toBe(429);
      expect(limited.json.error.code).toBe('rate_limited');
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(limited.headers.get('x-ratelimit-read')).toBe('3');
      // The management family is counted apart.
      expect((await get('/v1/sites')).status).toBe(200);
    });
  });
});
