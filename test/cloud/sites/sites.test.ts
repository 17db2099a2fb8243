import { afterEach, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { auditOf, createDevice, createSite } from '../../helpers/fixtures.ts';

const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

/** A cursor built by hand, the way a client that tampers with one would. */
const forged = (key: unknown) => Buffer.from(JSON.stringify(key)).toString('base64url');

describe.each(DATABASES)('sites on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  afterEach(async () => t?.stop());

  async function start(): Promise<void> {
    t = await startTestCloud({ db });
    user = await signUp(t, 'owner@example.com');
  }

  it('creates a site: 201 with id, name, vertical, timezone (UTC by default) and created_at', async () => {
    await start();
    const answer = await t.http.post(
      '/v1/sites',
      { name: 'Main kitchen', vertical: 'food_service' },
      { token: user.token },
    );
    expect(answer.status).toBe(201);
    expect(answer.json).toEqual({
      id: expect.stringMatching(/^site_[0-9A-Za-z]{20,}$/),
      name: 'Main kitchen',
      vertical: 'food_service',
      timezone: 'UTC',
      created_at: expect.stringMatching(TIMESTAMP),
    });
    const got = await t.http.get(`/v1/sites/${answer.json.id}`, { token: user.token });
    expect(got.status).toBe(200);
    expect(got.json).toEqual(answer.json);
  });

  it('keeps the time zone it is given', async () => {
    await start();
    const site = await createSite(t, user.token, { timezone: 'Europe/Berlin', vertical: 'pharma' });
    expect(site).toMatchObject({ timezone: 'Europe/Berlin', vertical: 'pharma' });
  });

  it('refuses an unknown vertical with 422 unknown_vertical and creates nothing', async () => {
    await start();
    const answer = await t.http.post('/v1/sites', { name: 'X', vertical: 'bakery' }, { token: user.token });
    expect(answer.status).toBe(422);
    expect(answer.json.error.code).toBe('unknown_vertical');
    expect((await t.http.get('/v1/sites', { token: user.token })).json.data).toEqual([]);
  });

  it('refuses an invalid time zone with 400 invalid_request naming the field', async () => {
    await start();
    const answer = await t.http.post(
      '/v1/sites',
      { name: 'X', vertical: 'generic', timezone: 'Mars/Olympus_Mons' },
      { token: user.token },
    );
    expect(answer.status).toBe(400);
    expect(answer.json.error.code).toBe('invalid_request');
    expect(answer.json.error.details).toEqual([{ path: 'timezone', message: expect.any(String) }]);
  });

  it('refuses a missing name and unknown fields with 400 invalid_request', async () => {
    await start();
    const missing = await t.http.post('/v1/sites', { vertical: 'generic' }, { token: user.token });
    expect(missing.status).toBe(400);
    expect(missing.json.error.details[0].path).toBe('name');
    const extra = await t.http.post(
      '/v1/sites',
      { name: 'X', vertical: 'generic', colour: 'red' },
      { token: user.token },
    );
    expect(extra.status).toBe(400);
    expect(extra.json.error.code).toBe('invalid_request');
  });

  it('pages through 7 sites three at a time: 3, 3, 1, the last with next_cursor null', async () => {
    await start();
    const created: string[] = [];
    for (let i = 0; i < 7; i++) created.push((await createSite(t, user.token, { name: `Site ${i}` })).id);
    const seen: string[] = [];
    const pages: { size: number; has_more: boolean; next_cursor: string | null }[] = [];
    let cursor: string | null = null;
    do {
      const query: string = `/v1/sites?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const page = await t.http.get(query, { token: user.token });
      expect(page.status).toBe(200);
      seen.push(...page.json.data.map((s: { id: string }) => s.id));
      pages.push({
        size: page.json.data.length,
        has_more: page.json.has_more,
        next_cursor: page.json.next_cursor,
      });
      cursor = page.json.next_cursor;
      expect(pages.length).toBeLessThanOrEqual(3);
    } while (cursor !== null);
    expect(pages.map((p) => [p.size, p.has_more])).toEqual([
      [3, true],
      [3, true],
      [1, false],
    ]);
    expect(pages.at(-1)!.next_cursor).toBeNull();
    expect(seen).toEqual(created); // oldest first, each site exactly once
  });

  it('has no trailing empty page when the sites fill the last page exactly', async () => {
    await start();
    for (let i = 0; i < 6; i++) await createSite(t, user.token);
    const first = await t.http.get('/v1/sites?limit=3', { token: user.token });
    const second = await t.http.get(`/v1/sites?limit=3&cursor=${first.json.next_cursor}`, {
      token: user.token,
    });
    expect(second.json.data).toHaveLength(3);
    expect(second.json.has_more).toBe(false);
    expect(second.json.next_cursor).toBeNull();
  });

  it('lists with the default limit and answers an empty account with an empty page', async () => {
    await start();
    expect((await t.http.get('/v1/sites', { token: user.token })).json).toEqual({
      data: [],
      next_cursor: null,
      has_more: false,
    });
  });

  it.each(['0', '501', '-1', 'ten', '2.5'])('refuses limit=%s with 400 invalid_request', async (limit) => {
    await start();
    const answer = await t.http.get(`/v1/sites?limit=${limit}`, { token: user.token });
    expect(answer.status).toBe(400);
    expect(answer.json.error.code).toBe('invalid_request');
    expect(answer.json.error.details[0].path).toBe('limit');
  });

  it('accepts limit=1 and limit=500', async () => {
    await start();
    await createSite(t, user.token);
    for (const limit of [1, 500]) {
      expect((await t.http.get(`/v1/sites?limit=${limit}`, { token: user.token })).status).toBe(200);
    }
  });

  it.each([
    ['text', 'not-a-cursor'],
    ['JSON that is not a key', forged({ a: 1 })],
    ['a key of the wrong types', forged(['yesterday', 42])],
    ['a key with a fraction', forged([1.5, 'site_x'])],
    ['a key of the wrong length', forged([1])],
  ])('refuses a garbage cursor (%s) with 400 invalid_request', async (_what, cursor) => {
    await start();
    await createSite(t, user.token);
    const answer = await t.http.get(`/v1/sites?cursor=${encodeURIComponent(cursor)}`, { token: user.token });
    expect(answer.status).toBe(400);
    expect(answer.json.error.code).toBe('invalid_request');
    expect(answer.json.error.details[0].path).toBe('cursor');
  });

  it('renames a site and changes its time zone; GET shows the change', async () => {
    await start();
    const site = await createSite(t, user.token);
    const answer = await t.http.patch(
      `/v1/sites/${site.id}`,
      { name: 'Cold room', timezone: 'America/St_Johns' },
      { token: user.token },
    );
    expect(answer.status).toBe(200);
    expect(answer.json).toEqual({ ...site, name: 'Cold room', timezone: 'America/St_Johns' });
    expect((await t.http.get(`/v1/sites/${site.id}`, { token: user.token })).json).toEqual(answer.json);
  });

  it.each([
    ['vertical', { vertical: 'pharma' }],
    ['id', { id: 'site_other' }],
    ['created_at', { created_at: '2020-01-01T00:00:00Z' }],
    ['an immutable field next to a valid one', { name: 'Renamed', vertical: 'pharma' }],
  ])('refuses a PATCH of %s with 400 invalid_request and changes nothing', async (_what, body) => {
    await start();
    const site = await createSite(t, user.token);
    const answer = await t.http.patch(`/v1/sites/${site.id}`, body, { token: user.token });
    expect(answer.status).toBe(400);
    expect(answer.json.error.code).toBe('invalid_request');
    expect((await t.http.get(`/v1/sites/${site.id}`, { token: user.token })).json).toEqual(site);
    expect(await auditOf(t, user.token, 'site.updated')).toEqual([]);
  });

  it('refuses a PATCH with an invalid time zone with 400', async () => {
    await start();
    const site = await createSite(t, user.token);
    const answer = await t.http.patch(
      `/v1/sites/${site.id}`,
      { timezone: 'Nowhere/Land' },
      { token: user.token },
    );
    expect(answer.status).toBe(400);
    expect(answer.json.error.details[0].path).toBe('timezone');
  });

  it('deletes an empty site: 204, then 404 site_not_found and gone from the list', async () => {
    await start();
    const site = await createSite(t, user.token);
    const answer = await t.http.delete(`/v1/sites/${site.id}`, { token: user.token });
    expect(answer.status).toBe(204);
    expect(answer.text).toBe('');
    const got = await t.http.get(`/v1/sites/${site.id}`, { token: user.token });
    expect(got.status).toBe(404);
    expect(got.json.error.code).toBe('site_not_found');
    expect((await t.http.get('/v1/sites', { token: user.token })).json.data).toEqual([]);
    const again = await t.http.delete(`/v1/sites/${site.id}`, { token: user.token });
    expect(again.status).toBe(404);
    expect(again.json.error.code).toBe('site_not_found');
  });

  it('refuses to delete a site while a device remains (409 site_not_empty), and deletes it after', async () => {
    await start();
    const site = await createSite(t, user.token);
    const device = await createDevice(t, user.token, site.id);
    const refused = await t.http.delete(`/v1/sites/${site.id}`, { token: user.token });
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe('site_not_empty');
    expect((await t.http.get(`/v1/sites/${site.id}`, { token: user.token })).status).toBe(200);
    expect(await auditOf(t, user.token, 'site.deleted')).toEqual([]);

    expect((await t.http.delete(`/v1/devices/${device.id}`, { token: user.token })).status).toBe(204);
    expect((await t.http.delete(`/v1/sites/${site.id}`, { token: user.token })).status).toBe(204);
  });

  it('answers 404 site_not_found for an unknown site on GET, PATCH and DELETE', async () => {
    await start();
    for (const answer of [
      await t.http.get('/v1/sites/site_doesnotexist', { token: user.token }),
      await t.http.patch('/v1/sites/site_doesnotexist', { name: 'x' }, { token: user.token }),
      await t.http.delete('/v1/sites/site_doesnotexist', { token: user.token }),
    ]) {
      expect(answer.status).toBe(404);
      expect(answer.json.error.code).toBe('site_not_found');
    }
  });

  it('records site.created, site.updated and site.deleted in the audit trail', async () => {
    await start();
    const site = await createSite(t, user.token, { name: 'Bar' });
    await t.http.patch(`/v1/sites/${site.id}`, { name: 'Bistro' }, { token: user.token });
    await t.http.delete(`/v1/sites/${site.id}`, { token: user.token });
    const entry = { by: user.userId, target: site.id, ts: expect.stringMatching(TIMESTAMP) };
    expect(await auditOf(t, user.token, 'site.created')).toEqual([
      expect.objectContaining({
        ...entry,
        kind: 'site.created',
        details: { name: 'Bar', vertical: 'food_service' },
      }),
    ]);
    expect(await auditOf(t, user.token, 'site.updated')).toEqual([
      expect.objectContaining({
        ...entry,
        kind: 'site.updated',
        details: { before: { name: 'Bar', timezone: 'UTC' }, after: { name: 'Bistro' } },
      }),
    ]);
    expect(await auditOf(t, user.token, 'site.deleted')).toEqual([
      expect.objectContaining({ ...entry, kind: 'site.deleted' }),
    ]);
  });
});
