import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';

/** Defects `npm run fuzz` found, each pinned here (docs/reliability.md). */
describe.each(DATABASES)('fuzz regressions on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  beforeAll(async () => {
    t = await startTestCloud({ db });
    user = await signUp(t, 'fuzz@example.com');
  });
  afterAll(async () => t?.stop());

  it('refuses a body nested thousands of levels deep with 400 invalid_request, not a stack overflow', async () => {
    const deepArray = '['.repeat(20_000) + ']'.repeat(20_000);
    const deepObject = '{"a":'.repeat(20_000) + '1' + '}'.repeat(20_000);
    for (const [method, path, raw, token] of [
      ['POST', '/v1/auth/request', deepObject, undefined],
      ['PATCH', '/v1/devices/dev_x', deepArray, user.token],
      ['POST', '/v1/sites', `{"name":"a","vertical":"food_service","x":${deepArray}}`, user.token],
    ] as const) {
      const answer = await t.http.call(method, path, undefined, {
        raw,
        token,
        headers: { 'content-type': 'application/json' },
      });
      expect([path, answer.status, answer.json.error.code]).toEqual([path, 400, 'invalid_request']);
    }
    expect(t.logs.filter((l) => Number(l.level) >= 50)).toEqual([]);
  });

  it('lets input nested 30 levels deep through to validation', async () => {
    const nested = '{"a":'.repeat(30) + '1' + '}'.repeat(30);
    const answer = await t.http.call('POST', '/v1/sites', undefined, {
      raw: `{"name":"Deep","vertical":"food_service","extra":${nested}}`,
      token: user.token,
      headers: { 'content-type': 'application/json' },
    });
    expect(answer.status).not.toBeGreaterThanOrEqual(500);
    // The schema refuses the unknown key, which shows the depth check let the body through to it.
    expect(answer.json.error.message).toMatch(/unknown field: extra/);
  });
});
