import { afterEach, describe, expect, it } from '@jest/globals';
import { codeFromMail, signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite, shellyActionUrl } from '../../helpers/fixtures.ts';
import { createBridge } from '../../helpers/mqtt.ts';
import { describeLeaks } from '../../helpers/secrets.ts';

/**
 * "Secrets never logged": every test cloud checks its captured logs and error bodies when it stops
 * (test/helpers/secrets.ts). This suite shows the check catches a leak, and walks every flow that
 * issues or receives a secret, including the ways a client might misplace one.
 */
describe.each(DATABASES)('secrets never logged on %s', (db) => {
  let t: TestCloud | undefined;
  afterEach(async () => {
    await t?.stop();
    t = undefined;
  });

  it('fails the stopping cloud when a token, a sign-in code or a private key reaches a log line', async () => {
    for (const plant of ['token', 'code', 'key'] as const) {
      const cloud = await startTestCloud({ db });
      const mail = cloud.nextMail('leak@example.com');
      const user = await signUp(cloud, 'leak@example.com');
      const code = codeFromMail(await mail);
      const leaked = {
        token: `saw ${user.token} in passing`,
        code: `code was ${code}`,
        key: '-----BEGIN PRIVATE KEY-----\nMIIB...',
      }[plant];
      cloud.cloud.services.log.warn({ detail: leaked }, 'careless line');
      await expect(cloud.stop()).rejects.toThrow(/secrets in logs or error bodies/);
    }
  });

  it('issues and receives every kind of secret without logging one', async () => {
    t = await startTestCloud({ db, mqtt: true, env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    const user = await signUp(t, 'owner@example.com');
    const site = await createSite(t, user.token);
    const device = await createDevice(t, user.token, site.id, { model: 'shelly-ht-gen1' });
    const rotated = await t.http.post(`/v1/devices/${device.id}/rotate-token`, {}, { token: user.token });
    expect(rotated.status).toBe(200);
    const webhook = await t.http.post(
      '/v1/webhooks',
      { url: 'http://127.0.0.1:9/in', events: ['alarm.opened'] },
      { token: user.token },
    );
    expect(webhook.json.secret).toMatch(/^whsec_/);
    const bridge = await createBridge(t, user.token, site.id);
    expect(bridge.key_pem).toMatch(/PRIVATE KEY/);

    // A magic link requested and followed.
    const mail = t.nextMail(user.email);
    await t.http.post('/v1/auth/request', { email: user.email });
    const link = /\/app\/auth\/callback\?t=[0-9A-Za-z]+/.exec((await mail).text)![0];
    await t.http.get(link);
    await t.http.get(link); // used twice: refused, the token not echoed

    // Secrets where they do not belong: in queries, in bodies, in odd headers, revoked, malformed.
    const shelly = shellyActionUrl(device, 4.5);
    await t.http.get(shelly.pathname + shelly.search);
    await t.http.get(`/v1/sites?token=${user.token}&access_token=${user.token}`, { token: user.token });
    await t.http.get(`/v1/sites?%74oken=${user.token}`);
    await t.http.get(`/v1/sites/${user.token}`, { token: user.token }); // once logged whole
    await t.http.get(`/v1/sites/x/${encodeURIComponent(user.token)}?${user.token}`);
    await t.http.post('/v1/sites', { name: user.token, vertical: user.token }, { token: user.token });
    await t.http.post('/v1/auth/verify', { email: user.email, code: `${user.token}` });
    await t.http.get('/v1/sites', { headers: { authorization: `Basic ${user.token}` } });
    await t.http.get('/v1/sites', { headers: { authorization: `Bearer ${user.token}x` } });
    await t.http.get('/v1/sites', { headers: { 'x-api-key': user.token, 'x-forwarded-for': user.token } });
    await t.http.get('/v1/sites', { cookie: `os_session=${user.cookie}x` });
    await t.http.get('/v1/sites', { token: rotated.json.ingest_token ?? device.ingest_token });
    await t.http.call('POST', '/v1/sites', undefined, {
      token: user.token,
      raw: `{"name": "${user.token}`,
      headers: { 'content-type': 'application/json' },
    });
    await t.http.delete(`/v1/webhooks/${webhook.json.id as string}`, { token: user.token });
    await t.http.get('/v1/sites', { token: user.token });

    const leaks = t.secrets.leaks(t.logs);
    expect(describeLeaks(leaks)).toBe('');
    expect(t.logs.length).toBeGreaterThan(10);
  });
});
