import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite, type CreatedDevice } from '../../helpers/fixtures.ts';
import { at, ingestHttp, READ_ENV } from './reads-helpers.ts';

const NOW = at('2026-03-10T12:00:00Z');
const MINUTE = 60_000_000;

describe.each(DATABASES)('GET /v1/measurements on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let device: CreatedDevice;
  afterEach(async () => t?.stop());

  async function start(): Promise<void> {
    t = await startTestCloud({ db, clock: new ManualClock(NOW), env: READ_ENV });
    user = await signUp(t, 'reader@example.com');
    const site = await createSite(t, user.token);
    device = await createDevice(t, user.token, site.id, { local_id: 'fridge-1' });
  }

  const get = (path: string) => t.http.get(path, { token: user.token });

  it('answers one series per channel, keyed by channel id, with the same agg, fn and range', async () => {
    await start();
    const a = await ingestHttp(t, device, [
      { ts: NOW - 130 * MINUTE, value: 1 },
      { ts: NOW - 100 * MINUTE, value: 3 },
      { ts: NOW - 10 * MINUTE, value: 5 },
    ]);
    const b = await ingestHttp(t, device, [{ ts: NOW - 70 * MINUTE, value: 40 }], { type: 'humidity' });
    const answer = await get(`/v1/measurements?channel_ids=${a},${b},${a}&agg=1h&fn=mean`);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('x-ratelimit-read')).toBe(READ_ENV.RATE_LIMIT_READ_PER_MIN);
    expect(answer.json).toEqual({
      data: {
        [a]: [
          { ts: '2026-03-10T09:00:00.000000Z', value: 1 },
          { ts: '2026-03-10T10:00:00.000000Z', value: 3 },
          { ts: '2026-03-10T11:00:00.000000Z', value: 5 },
        ],
        [b]: [{ ts: '2026-03-10T10:00:00.000000Z', value: 40 }],
      },
      has_more: { [a]: false, [b]: false },
      next_cursor: { [a]: null, [b]: null },
    });
    const repeated = await get(`/v1/measurements?channel_ids=${a}&channel_ids=${b}&agg=1h`);
    expect(Object.keys(repeated.json.data)).toEqual([a, b]);
    const raw = await get(
      `/v1/measurements?channel_ids=${b}&from=${encodeURIComponent('2026-03-10T10:00:00Z')}`,
    );
    expect(raw.json.data).toEqual({ [b]: [{ ts: '2026-03-10T10:50:00.000000Z', value: 40 }] });
  });

  it('caps each series at limit; its next_cursor continues on the channel route', async () => {
    await start();
    const readings = Array.from({ length: 5 }, (_, i) => ({ ts: NOW - (50 - i) * MINUTE, value: i }));
    const a = await ingestHttp(t, device, readings);
    const answer = await get(`/v1/measurements?channel_ids=${a}&limit=2`);
    expect(answer.json.data[a]).toHaveLength(2);
    expect(answer.json.has_more[a]).toBe(true);
    const next = await get(`/v1/channels/${a}/measurements?limit=2&cursor=${answer.json.next_cursor[a]}`);
    expect(next.json.data.map((p: { value: number }) => p.value)).toEqual([2, 3]);
    const last = await get(`/v1/channels/${a}/measurements?limit=2&cursor=${next.json.next_cursor}`);
    expect(last.json).toMatchObject({ has_more: false, next_cursor: null });
    const rest = { points: [...next.json.data, ...last.json.data] as { value: number }[] };
    expect(rest.points.map((p) => p.value)).toEqual([2, 3, 4]);
  });

  it('answers 404 channel_not_found when any id is unknown or foreign, 400 for a bad list', async () => {
    await start();
    const a = await ingestHttp(t, device, [{ ts: NOW - MINUTE, value: 1 }]);
    const unknown = await get(`/v1/measurements?channel_ids=${a},chn_nope`);
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.code).toBe('channel_not_found');
    const other = await signUp(t, 'other@example.com');
    const foreign = await t.http.get(`/v1/measurements?channel_ids=${a}`, { token: other.token });
    expect(foreign.status).toBe(404);
    expect(foreign.json.error.code).toBe('channel_not_found');

    for (const query of ['', 'channel_ids=', 'channel_ids=,,']) {
      const answer = await get(`/v1/measurements?${query}`);
      expect([query, answer.status, answer.json.error.code]).toEqual([query, 400, 'invalid_request']);
    }
    const tooMany = Array.from({ length: 51 }, (_, i) => `chn_${i}`).join(',');
    const many = await get(`/v1/measurements?channel_ids=${tooMany}`);
    expect(many.status).toBe(400);
    expect(many.json.error.details[0].path).toBe('channel_ids');
    const bad = await get(`/v1/measurements?channel_ids=${a}&agg=7m`);
    expect([bad.status, bad.json.error.code]).toEqual([400, 'invalid_request']);
    const cursor = await get(`/v1/measurements?channel_ids=${a}&cursor=abc`);
    expect([cursor.status, cursor.json.error.code]).toEqual([400, 'invalid_request']);
    const range = await get(
      `/v1/measurements?channel_ids=${a}&from=${encodeURIComponent('2026-03-10T12:00:00Z')}&to=${encodeURIComponent('2026-03-10T11:00:00Z')}`,
    );
    expect([range.status, range.json.error.code]).toEqual([422, 'invalid_range']);
  });
});
