import { afterEach, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createSite } from '../../helpers/fixtures.ts';

/** Answers that carry a secret shown once are never stored, so an Idempotency-Key cannot replay them. */
describe.each(DATABASES)('Idempotency-Key on answers with secrets, on %s', (db) => {
  let t: TestCloud;
  afterEach(async () => t?.stop());

  it('does not keep a token, device token or webhook secret in the idempotency store, and refuses to replay them', async () => {
    t = await startTestCloud({ db, env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    const user = await signUp(t, 'ops@example.com');
    const site = await createSite(t, user.token);
    const headers = { 'Idempotency-Key': 'create-once' };
    const body = { site_id: site.id, local_id: 'probe', name: 'Probe', model: 'http-generic' };
    const created = await t.http.post('/v1/devices', body, { token: user.token, headers });
    expect(created.status).toBe(201);
    const token = await t.http.post(
      '/v1/tokens',
      { label: 'ci', scope: 'read' },
      { token: user.token, headers: { 'Idempotency-Key': 'token-once' } },
    );
    expect(token.status).toBe(201);
    const hookBody = { url: 'http://127.0.0.1:9/hook', events: ['alarm.opened'] };
    const hookHeaders = { 'Idempotency-Key': 'hook-once' };
    const hook = await t.http.post('/v1/webhooks', hookBody, { token: user.token, headers: hookHeaders });
    expect([hook.status, hook.json.secret]).toEqual([201, expect.stringMatching(/^whsec_/)]);

    const stored = await t.cloud.services.db
      .selectFrom('idempotency_keys')
      .select(['key', 'response'])
      .execute();
    const text = JSON.stringify(stored);
    expect(text).not.toContain(created.json.ingest_token);
    expect(text).not.toContain(token.json.token);
    expect(text).not.toContain(hook.json.secret);

    const again = await t.http.post('/v1/devices', body, { token: user.token, headers });
    expect(again.status).toBe(409);
    expect(again.json.error.code).toBe('idempotency_secret_withheld');
    const list = await t.http.get(`/v1/devices?site_id=${site.id}`, { token: user.token });
    expect(list.json.data).toHaveLength(1);
    const hookAgain = await t.http.post('/v1/webhooks', hookBody, {
      token: user.token,
      headers: hookHeaders,
    });
    expect([hookAgain.status, hookAgain.json.error.code]).toEqual([409, 'idempotency_secret_withheld']);
  });
});
