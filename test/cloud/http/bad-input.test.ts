import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite, type CreatedDevice } from '../../helpers/fixtures.ts';
import type { Answer } from '../../helpers/http.ts';

/**
 * Input from outside never gives a 5xx: each case here once answered 500 (logged with a stack), and
 * on PostgreSQL every string holding U+0000 did, since its text type cannot store it. A 500 tells a
 * device "safe to retry", so a device sending such a label would resend it forever.
 */
describe.each(DATABASES)('bad input on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let siteId: string;
  let device: CreatedDevice;

  beforeEach(async () => {
    t = await startTestCloud({ db });
    user = await signUp(t, 'owner@example.com');
    siteId = (await createSite(t, user.token)).id;
    device = await createDevice(t, user.token, siteId, { local_id: 'fridge-1' });
  });
  afterEach(async () => t?.stop());

  /** A 4xx in the error envelope, and no error logged for it. */
  function expectRefused(answer: Answer, status: number, code: string): void {
    expect([answer.status, answer.json?.error?.code]).toEqual([status, code]);
    expect(answer.json.error.request_id).toMatch(/^req_/);
    expect(t.logs.filter((l) => l.level === 50)).toEqual([]);
  }

  it('answers a malformed percent-encoded session cookie as no session', async () => {
    const answer = await t.http.post(
      '/v1/tokens',
      { label: 'x', scope: 'read' },
      { cookie: 'os_session=%E0%A4%A' },
    );
    expectRefused(answer, 401, 'auth_required');
  });

  it('answers a path with a malformed percent-encoding with 400', async () => {
    expectRefused(await t.http.get('/v1/sites/%E0%A4%A', { token: user.token }), 400, 'invalid_request');
  });

  it.each([['gzip'], ['br'], ['deflate']])(
    'answers a body that does not decompress (Content-Encoding: %s) with 400',
    async (encoding) => {
      const answer = await t.http.post('/v1/sites', undefined, {
        token: user.token,
        raw: 'not compressed at all',
        headers: { 'content-type': 'application/json', 'content-encoding': encoding },
      });
      expectRefused(answer, 400, 'bad_json');
    },
  );

  describe('U+0000 in a string', () => {
    const details = (answer: Answer) => answer.json.error.details.map((d: { path: string }) => d.path);

    it('in a body: 422 invalid_characters naming the field', async () => {
      const site = await t.http.post(
        '/v1/sites',
        { name: 'Kit\u0000chen', vertical: 'generic' },
        { token: user.token },
      );
      expectRefused(site, 422, 'invalid_characters');
      expect(details(site)).toEqual(['name']);
      const notes = await t.http.patch(
        `/v1/devices/${device.id}`,
        { notes: 'a\u0000b' },
        { token: user.token },
      );
      expectRefused(notes, 422, 'invalid_characters');
      expect(details(notes)).toEqual(['notes']);
      const verify = await t.http.post('/v1/auth/verify', { email: 'a\u0000@example.com', code: 'AAA-AAA' });
      expectRefused(verify, 422, 'invalid_characters');
      expect(details(verify)).toEqual(['email']);
    });

    it('in a query filter or a path id: 422 invalid_characters', async () => {
      const filter = await t.http.get('/v1/events?site_id=sit_%00', { token: user.token });
      expectRefused(filter, 422, 'invalid_characters');
      expect(details(filter)).toEqual(['site_id']);
      const id = await t.http.get('/v1/sites/sit_%00x', { token: user.token });
      expectRefused(id, 422, 'invalid_characters');
      expect(details(id)).toEqual(['site_id']);
      const devices = await t.http.get('/v1/devices?site_id=%00', { token: user.token });
      expectRefused(devices, 422, 'invalid_characters');
    });

    it('in an ingest label or device: 422 invalid_characters, never "safe to retry"', async () => {
      const label = await t.http.post(
        '/v1/ingest',
        { device: 'fridge-1', measurements: [{ type: 'temperature', value: 3, label: 'do\u0000or' }] },
        { token: device.ingest_token },
      );
      expectRefused(label, 422, 'invalid_characters');
      expect(label.json.error.details).toEqual([expect.objectContaining({ path: 'measurements[0].label' })]);
      const shelly = await t.http.get(
        `/v1/ingest/shelly?token=${device.ingest_token}&device=fr%00idge&temp=3`,
      );
      expectRefused(shelly, 422, 'invalid_characters');
    });
  });
});
