import { execFile } from 'node:child_process';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, tempDir } from '../../helpers/databases.ts';
import { auditOf, createSite } from '../../helpers/fixtures.ts';

const run = promisify(execFile);

describe.each(DATABASES)('POST/GET/DELETE /v1/bridges on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let siteId: string;

  beforeEach(async () => {
    t = await startTestCloud({ db });
    user = await signUp(t, 'ops@example.com');
    siteId = (await createSite(t, user.token)).id;
  });
  afterEach(async () => t?.stop());

  const create = (
    body: unknown = { site_id: siteId, name: 'Kitchen broker' },
    token = user.token,
    headers = {},
  ) => t.http.post('/v1/bridges', body, { token, headers });

  it('issues a client certificate for the account and answers the bundle once', async () => {
    const answer = await create();
    expect(answer.status).toBe(201);
    const b = answer.json;
    expect(b).toEqual({
      id: expect.stringMatching(/^brg_[0-9A-Za-z]{22}$/),
      site_id: siteId,
      name: 'Kitchen broker',
      topic_root: `service/${user.accountId}/`,
      mqtt_url: expect.stringMatching(/^mqtts:\/\/localhost:\d+$/),
      cert_serial: expect.stringMatching(/^[0-9a-f]{32}$/),
      cert_fingerprint: expect.stringMatching(/^[0-9a-f]{64}$/),
      expires_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
      created_at: expect.any(String),
      connected: false,
      last_seen_at: null,
      cert_pem: expect.stringMatching(/^-----BEGIN CERTIFICATE-----\n/),
      key_pem: expect.stringMatching(/^-----BEGIN PRIVATE KEY-----\n/),
      ca_pem: expect.stringMatching(/^-----BEGIN CERTIFICATE-----\n/),
    });
    const cert = new X509Certificate(b.cert_pem);
    const ca = new X509Certificate(b.ca_pem);
    expect(cert.subject).toBe(`CN=${user.accountId}\nOU=${b.id}`);
    expect(cert.checkPrivateKey(createPrivateKey(b.key_pem))).toBe(true);
    expect(cert.verify(ca.publicKey)).toBe(true);
    expect(cert.checkIssued(ca)).toBe(true);
    expect(cert.fingerprint256.replace(/:/g, '').toLowerCase()).toBe(b.cert_fingerprint);
    expect(cert.serialNumber.toLowerCase()).toBe(b.cert_serial);
    expect(new Date(cert.validTo).toISOString().replace('.000', '')).toBe(b.expires_at);
    expect(cert.keyUsage).toEqual(['1.3.6.1.5.5.7.3.2']); // extended key usage: clientAuth only
    expect(ca.ca).toBe(true);

    // OpenSSL, an implementation nobody here wrote, agrees.
    const dir = tempDir('sm-bridge-');
    try {
      fs.writeFileSync(path.join(dir, 'ca.pem'), b.ca_pem);
      fs.writeFileSync(path.join(dir, 'cert.pem'), b.cert_pem);
      const verified = await run('openssl', [
        'verify',
        '-purpose',
        'sslclient',
        '-CAfile',
        path.join(dir, 'ca.pem'),
        path.join(dir, 'cert.pem'),
      ]);
      expect(verified.stdout).toMatch(/cert\.pem: OK/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }

    // The key is not kept: neither the list nor the bridge shows it.
    const listed = await t.http.get('/v1/bridges', { token: user.token });
    expect(listed.json).toEqual({
      data: [expect.objectContaining({ id: b.id, connected: false })],
      next_cursor: null,
      has_more: false,
    });
    expect(listed.text).not.toContain('PRIVATE KEY');
    const one = await t.http.get(`/v1/bridges/${b.id}`, { token: user.token });
    expect(one.status).toBe(200);
    expect(one.json).not.toHaveProperty('key_pem');
    expect(one.json).not.toHaveProperty('cert_pem');
    expect((await auditOf(t, user.token, 'bridge.created'))[0]).toMatchObject({
      by: user.userId,
      target: b.id,
    });
  });

  it('revokes on DELETE: 204, then the bridge is gone (404 bridge_not_found), audited', async () => {
    const b = (await create()).json;
    expect((await t.http.delete(`/v1/bridges/${b.id}`, { token: user.token })).status).toBe(204);
    for (const answer of [
      await t.http.get(`/v1/bridges/${b.id}`, { token: user.token }),
      await t.http.delete(`/v1/bridges/${b.id}`, { token: user.token }),
    ]) {
      expect(answer.status).toBe(404);
      expect(answer.json.error.code).toBe('bridge_not_found');
    }
    expect((await t.http.get('/v1/bridges', { token: user.token })).json.data).toEqual([]);
    expect((await auditOf(t, user.token, 'bridge.revoked'))[0]).toMatchObject({ target: b.id });
  });

  it('needs the admin scope to create or delete, read to list', async () => {
    const b = (await create()).json;
    for (const scope of ['read', 'write']) {
      const token = (await t.http.post('/v1/tokens', { label: scope, scope }, { token: user.token })).json
        .token;
      const denied = await create(undefined, token);
      expect(denied.status).toBe(403);
      expect(denied.json.error.code).toBe('forbidden');
      expect((await t.http.delete(`/v1/bridges/${b.id}`, { token })).status).toBe(403);
      expect((await t.http.get('/v1/bridges', { token })).status).toBe(200);
    }
  });

  it('answers 404 for another account’s site or bridge, 400 for an invalid body', async () => {
    const other = await signUp(t, 'other@example.com');
    const otherSite = (await createSite(t, other.token)).id;
    const foreign = await create({ site_id: otherSite, name: 'x' });
    expect(foreign.status).toBe(404);
    expect(foreign.json.error.code).toBe('site_not_found');
    // 404 before 400: a foreign site is not found, whatever else is wrong.
    expect((await create({ site_id: otherSite })).json.error.code).toBe('site_not_found');
    const theirs = (await create({ site_id: otherSite, name: 'theirs' }, other.token)).json;
    expect((await t.http.get(`/v1/bridges/${theirs.id}`, { token: user.token })).json.error.code).toBe(
      'bridge_not_found',
    );
    expect((await t.http.delete(`/v1/bridges/${theirs.id}`, { token: user.token })).status).toBe(404);
    expect((await t.http.get('/v1/bridges', { token: user.token })).json.data).toEqual([]);
    for (const body of [
      { site_id: siteId },
      { site_id: siteId, name: '' },
      { site_id: siteId, name: 'x', extra: 1 },
      { name: 'x' },
    ]) {
      const answer = await create(body);
      expect(answer.status).toBe(400);
      expect(answer.json.error.code).toBe('invalid_request');
    }
  });

  it('does not replay the key under an Idempotency-Key', async () => {
    const headers = { 'Idempotency-Key': 'bridge-1' };
    expect((await create(undefined, user.token, headers)).status).toBe(201);
    const again = await create(undefined, user.token, headers);
    expect(again.status).toBe(409);
    expect(again.json.error.code).toBe('idempotency_secret_withheld');
    expect((await t.http.get('/v1/bridges', { token: user.token })).json.data).toHaveLength(1);
  });

  it('names MQTT_URL in the bundle when it is configured', async () => {
    const t2 = await startTestCloud({ db, env: { MQTT_URL: 'mqtts://mqtt.example.com:8883' } });
    try {
      const u = await signUp(t2, 'x@example.com');
      const s = (await createSite(t2, u.token)).id;
      const b = (await t2.http.post('/v1/bridges', { site_id: s, name: 'b' }, { token: u.token })).json;
      expect(b.mqtt_url).toBe('mqtts://mqtt.example.com:8883');
    } finally {
      await t2.stop();
    }
  });
});
