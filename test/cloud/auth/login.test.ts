import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { formatSeconds } from '../../../shared/time.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { startSmtpServer } from '../../helpers/smtp.ts';
import { codeFromMail, linkFromMail, signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';

const T0 = Date.UTC(2026, 0, 5, 10, 0, 0) * 1000;
const DAY_MICROS = 24 * 3600 * 1_000_000;

describe.each(DATABASES)('magic-link login on %s', (db) => {
  let t: TestCloud;
  afterEach(async () => t?.stop());

  async function requestCode(email: string): Promise<string> {
    const mail = t.nextMail(email);
    const answer = await t.http.post('/v1/auth/request', { email });
    expect(answer.status).toBe(200);
    expect(answer.json).toEqual({});
    return codeFromMail(await mail);
  }

  it('signs a new user up from the outbox mail, sets the cookie, and the token it makes works', async () => {
    t = await startTestCloud({ db });
    const mail = t.nextMail('chef@example.com');
    expect((await t.http.post('/v1/auth/request', { email: 'Chef@Example.com ' })).status).toBe(200);
    const sent = await mail;
    expect(sent.file).toMatch(new RegExp(`^${t.database.dataDir}/outbox/.*\\.eml$`));
    const eml = fs.readFileSync(sent.file!, 'utf8');
    expect(eml).toMatch(/^To: chef@example.com$/m);
    const code = codeFromMail(sent);
    expect(code).toMatch(/^[ABCDEFGHJKMNPQRSTUVWXYZ23456789]{3}-[ABCDEFGHJKMNPQRSTUVWXYZ23456789]{3}$/);
    // the outbox delivery is also logged with its subject, so a local install needs no mail server
    expect(t.logs.some((l) => l.msg === 'mail written to outbox' && String(l.subject).includes(code))).toBe(
      true,
    );

    const verified = await t.http.post('/v1/auth/verify', { email: 'chef@example.com', code });
    expect(verified.status).toBe(200);
    expect(verified.json).toEqual({
      session_id: expect.stringMatching(/^ses_/),
      expires_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
      user_id: expect.stringMatching(/^usr_/),
    });
    const setCookie = verified.headers.getSetCookie()[0]!;
    expect(setCookie).toMatch(/^os_session=[^;]+; Path=\/; Max-Age=2592000; HttpOnly; Secure; SameSite=Lax$/);
    expect(setCookie).not.toContain(verified.json.session_id);

    const cookie = `os_session=${verified.cookie('os_session')}`;
    const created = await t.http.post('/v1/tokens', { label: 'script', scope: 'write' }, { cookie });
    expect(created.status).toBe(201);
    expect(created.json).toEqual({
      id: expect.stringMatching(/^tok_/),
      token: expect.stringMatching(/^ua_live_[0-9A-Za-z]{43,}$/),
      label: 'script',
      scope: 'write',
      created_at: expect.any(String),
    });
    const sites = await t.http.get('/v1/sites', { token: created.json.token });
    expect(sites.status).toBe(200);
    expect(sites.json).toEqual({ data: [], next_cursor: null, has_more: false });
    const me = await t.http.get('/v1/accounts/me', { token: created.json.token });
    expect(me.json.users).toEqual([
      expect.objectContaining({ id: verified.json.user_id, email: 'chef@example.com' }),
    ]);
  });

  it('accepts the code in any case and without the hyphen', async () => {
    t = await startTestCloud({ db });
    const code = await requestCode('a@example.com');
    const answer = await t.http.post('/v1/auth/verify', {
      email: 'a@example.com',
      code: code.replace('-', '').toLowerCase(),
    });
    expect(answer.status).toBe(200);
  });

  it('refuses a reused code with 401 code_invalid', async () => {
    t = await startTestCloud({ db });
    const code = await requestCode('a@example.com');
    expect((await t.http.post('/v1/auth/verify', { email: 'a@example.com', code })).status).toBe(200);
    const again = await t.http.post('/v1/auth/verify', { email: 'a@example.com', code });
    expect(again.status).toBe(401);
    expect(again.json.error.code).toBe('code_invalid');
  });

  it('refuses an expired code (10 minutes) with 401 code_invalid', async () => {
    const clock = new ManualClock(T0);
    t = await startTestCloud({ db, clock });
    const code = await requestCode('a@example.com');
    clock.advanceMs(10 * 60 * 1000);
    const answer = await t.http.post('/v1/auth/verify', { email: 'a@example.com', code });
    expect(answer.status).toBe(401);
    expect(answer.json.error.code).toBe('code_invalid');
  });

  it('accepts a code just before it expires', async () => {
    const clock = new ManualClock(T0);
    t = await startTestCloud({ db, clock });
    const code = await requestCode('a@example.com');
    clock.advanceMs(10 * 60 * 1000 - 1);
    expect((await t.http.post('/v1/auth/verify', { email: 'a@example.com', code })).status).toBe(200);
  });

  it('refuses a superseded code once a new one was requested', async () => {
    t = await startTestCloud({ db });
    const first = await requestCode('a@example.com');
    const second = await requestCode('a@example.com');
    const old = await t.http.post('/v1/auth/verify', { email: 'a@example.com', code: first });
    expect(old.status).toBe(401);
    expect(old.json.error.code).toBe('code_invalid');
    expect((await t.http.post('/v1/auth/verify', { email: 'a@example.com', code: second })).status).toBe(200);
  });

  it('refuses a code after five wrong tries, and its link still signs the owner in', async () => {
    t = await startTestCloud({ db });
    const mail = t.nextMail('a@example.com');
    await t.http.post('/v1/auth/request', { email: 'a@example.com' });
    const text = await mail;
    const code = codeFromMail(text);
    const wrong = code === 'AAA-AAA' ? 'BBB-BBB' : 'AAA-AAA';
    for (let i = 0; i < 5; i++) {
      expect((await t.http.post('/v1/auth/verify', { email: 'a@example.com', code: wrong })).status).toBe(
        401,
      );
    }
    const right = await t.http.post('/v1/auth/verify', { email: 'a@example.com', code });
    expect(right.status).toBe(401);
    expect(right.json.error.code).toBe('code_invalid');
    // Whoever typed the wrong codes knew the address only; the link in the owner's mail still works.
    const link = new URL(linkFromMail(text));
    const json = { headers: { Accept: 'application/json' } }; // a script, as the API's users open it
    const signedIn = await t.http.get(link.pathname + link.search, json);
    expect(signedIn.status).toBe(303);
    expect(signedIn.cookie('os_session')).toBeTruthy();
    expect((await t.http.get(link.pathname + link.search, json)).status).toBe(401);
  });

  it('compares at most five guesses of a code, however many arrive at once', async () => {
    t = await startTestCloud({ db });
    const code = await requestCode('a@example.com');
    const wrong = code === 'AAA-AAA' ? 'BBB-BBB' : 'AAA-AAA';
    const answers = await Promise.all(
      Array.from({ length: 100 }, () =>
        t.http.post('/v1/auth/verify', { email: 'a@example.com', code: wrong }),
      ),
    );
    expect(answers.every((a) => a.status === 401 || a.status === 429)).toBe(true);
    const row = await t.cloud.services.db
      .selectFrom('login_codes')
      .select(['attempts', 'state'])
      .where('email', '=', 'a@example.com')
      .executeTakeFirstOrThrow();
    // The code is used up; its row stays issued, for the link.
    expect(row).toEqual({ attempts: 5, state: 'issued' });
  });

  it('limits code entries per e-mail and per address with 429 rate_limited and Retry-After', async () => {
    t = await startTestCloud({ db });
    for (let i = 0; i < 15; i++) {
      const answer = await t.http.post('/v1/auth/verify', { email: 'a@example.com', code: 'AAA-AAA' });
      expect(answer.status).toBe(401);
    }
    const perEmail = await t.http.post('/v1/auth/verify', { email: 'a@example.com', code: 'AAA-AAA' });
    expect(perEmail.status).toBe(429);
    expect(perEmail.json.error.code).toBe('rate_limited');
    expect(Number(perEmail.headers.get('retry-after'))).toBeGreaterThan(0);
    // Another e-mail from the same address is still served, up to the address's own limit.
    for (let i = 0; i < 44; i++) {
      const answer = await t.http.post('/v1/auth/verify', { email: `u${i}@example.com`, code: 'AAA-AAA' });
      expect(answer.status).toBe(401);
    }
    const perIp = await t.http.post('/v1/auth/verify', { email: 'late@example.com', code: 'AAA-AAA' });
    expect(perIp.status).toBe(429);
    expect(Number(perIp.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('answers a code for an e-mail that never asked with 401, and a malformed body with 400', async () => {
    t = await startTestCloud({ db });
    const answer = await t.http.post('/v1/auth/verify', { email: 'nobody@example.com', code: 'ABC-DEF' });
    expect(answer.status).toBe(401);
    expect(answer.json.error.code).toBe('code_invalid');
    const bad = await t.http.post('/v1/auth/request', { email: 'not-an-email' });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('invalid_request');
    expect(bad.json.error.details[0].path).toBe('email');
  });

  it('signs in through the e-mailed link once, then refuses the link', async () => {
    t = await startTestCloud({ db });
    const mail = t.nextMail('a@example.com');
    await t.http.post('/v1/auth/request', { email: 'a@example.com' });
    const link = new URL(linkFromMail(await mail));
    expect(link.pathname).toBe('/app/auth/callback');
    const json = { headers: { Accept: 'application/json' } }; // a script, as the API's users open it
    const first = await t.http.get(link.pathname + link.search, json);
    expect(first.status).toBe(303);
    expect(first.headers.get('location')).toBe('/app/');
    const cookie = first.cookie('os_session');
    expect(cookie).toBeTruthy();
    expect(
      (await t.http.post('/v1/tokens', { label: 'x', scope: 'read' }, { cookie: `os_session=${cookie}` }))
        .status,
    ).toBe(201);
    const second = await t.http.get(link.pathname + link.search, json);
    expect(second.status).toBe(401);
    expect(second.json.error.code).toBe('code_invalid');
  });

  it("signs in by the link only the browser that asked, or after a confirm; never from another site's image", async () => {
    t = await startTestCloud({ db });
    const mail = t.nextMail('a@example.com');
    const asked = await t.http.post('/v1/auth/request', { email: 'a@example.com' });
    const browserCookie = asked.cookie('os_signin');
    expect(browserCookie).toBeTruthy();
    expect(asked.headers.getSetCookie().join()).toContain('Path=/app/auth/callback');
    const link = new URL(linkFromMail(await mail));
    const path = link.pathname + link.search;
    const navigation = { Accept: 'text/html', 'Sec-Fetch-Dest': 'document', 'Sec-Fetch-Mode': 'navigate' };
    // Another site's page that loads the link as an image: refused, the link unspent.
    const image = await t.http.get(path, {
      headers: { Accept: 'image/*', 'Sec-Fetch-Dest': 'image', 'Sec-Fetch-Site': 'cross-site' },
    });
    expect([image.status, image.json.error.code, image.cookie('os_session')]).toEqual([
      403,
      'forbidden',
      null,
    ]);
    // A mail scanner or a link preview (HEAD, or any type accepted): the confirm page, the link unspent.
    for (const method of ['HEAD', 'GET']) {
      const scanned = await t.http.call(method, path, undefined, { headers: { Accept: '*/*' } });
      expect([method, scanned.status, scanned.cookie('os_session')]).toEqual([method, 200, null]);
    }
    // Another browser: the confirm page, naming the address; nothing signed in yet.
    const elsewhere = await t.http.get(path, { headers: { ...navigation, 'Sec-Fetch-Site': 'cross-site' } });
    expect(elsewhere.status).toBe(200);
    expect(elsewhere.headers.get('content-type')).toContain('text/html');
    expect(elsewhere.headers.get('x-frame-options')).toBe('DENY');
    expect(elsewhere.text).toContain('Sign in as a@example.com?');
    expect(elsewhere.cookie('os_session')).toBeNull();
    // The asking browser: signed in at once, its sign-in cookie spent.
    const here = await t.http.get(path, {
      headers: { ...navigation, 'Sec-Fetch-Site': 'cross-site' },
      cookie: `os_signin=${browserCookie}`,
    });
    expect([here.status, here.headers.get('location')]).toEqual([303, '/app/']);
    expect(here.cookie('os_session')).toBeTruthy();
    expect(
      here.headers.getSetCookie().some((c) => c.startsWith('os_signin=;') && c.includes('Max-Age=0')),
    ).toBe(true);
  });

  it('answers 200 and sends nothing for an unknown e-mail when sign-up is closed', async () => {
    t = await startTestCloud({ db, env: { SIGNUP: 'closed' } });
    const answer = await t.http.post('/v1/auth/request', { email: 'stranger@example.com' });
    expect(answer.status).toBe(200);
    expect(answer.json).toEqual({});
    await t.cloud.services.jobs.drain();
    expect(fs.existsSync(path.join(t.database.dataDir, 'outbox'))).toBe(false);
  });

  it('sends at most five codes per e-mail in ten minutes, still answering 200', async () => {
    t = await startTestCloud({ db });
    for (let i = 0; i < 7; i++)
      expect((await t.http.post('/v1/auth/request', { email: 'a@example.com' })).status).toBe(200);
    await t.cloud.services.jobs.drain();
    expect(fs.readdirSync(path.join(t.database.dataDir, 'outbox'))).toHaveLength(5);
  });

  it('limits sign-in requests per IP address with 429 rate_limited and Retry-After', async () => {
    t = await startTestCloud({ db });
    for (let i = 0; i < 100; i++) {
      expect((await t.http.post('/v1/auth/request', { email: `u${i}@example.com` })).status).toBe(200);
    }
    const limited = await t.http.post('/v1/auth/request', { email: 'late@example.com' });
    expect(limited.status).toBe(429);
    expect(limited.json.error.code).toBe('rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('sets the cookie Domain when DASHBOARD_DOMAIN is configured', async () => {
    t = await startTestCloud({ db, env: { DASHBOARD_DOMAIN: 'app.example.com' } });
    const code = await requestCode('a@example.com');
    const verified = await t.http.post('/v1/auth/verify', { email: 'a@example.com', code });
    expect(verified.headers.getSetCookie()[0]).toMatch(
      /^os_session=[^;]+; Path=\/; Max-Age=2592000; Domain=app\.example\.com; HttpOnly; Secure; SameSite=Lax$/,
    );
  });

  it('delivers the code through a real SMTP server when SMTP_URL is set', async () => {
    const smtp = await startSmtpServer();
    const { received, port } = smtp;
    try {
      t = await startTestCloud({
        db,
        env: { SMTP_URL: `smtp://127.0.0.1:${port}`, MAIL_FROM: 'Monitor <alerts@example.org>' },
      });
      const mail = t.nextMail('a@example.com');
      await t.http.post('/v1/auth/request', { email: 'a@example.com' });
      const sent = await mail;
      expect(sent.file).toBeNull();
      expect(received).toHaveLength(1);
      expect(received[0]).toMatch(/^From: Monitor <alerts@example.org>$/m);
      const code = /^Subject: Your sign-in code: (\w{3}-\w{3})$/m.exec(received[0]!)![1]!;
      expect(received[0]).toContain(`Your sign-in code is ${code}`);
      expect((await t.http.post('/v1/auth/verify', { email: 'a@example.com', code })).status).toBe(200);
      expect(fs.existsSync(path.join(t.database.dataDir, 'outbox'))).toBe(false);
      // Whoever reads the logs cannot sign in: neither the code nor the link's token is in them.
      const link = /\?t=([A-Za-z0-9_-]+)/.exec(received[0]!.replace(/=\r?\n/g, '').replace(/=3D/g, '='))![1]!;
      const logged = JSON.stringify(t.logs);
      expect(logged).not.toContain(code);
      expect(logged).not.toContain(code.replace('-', ''));
      expect(logged).not.toContain(link);
      expect(t.logs).toContainEqual(
        expect.objectContaining({ msg: 'mail sent', to: 'a@example.com', messageId: expect.any(String) }),
      );
    } finally {
      await smtp.close();
    }
  });
});

describe.each(DATABASES)('sessions on %s', (db) => {
  let t: TestCloud;
  afterEach(async () => t?.stop());

  it('is not accepted by the API except for POST /v1/tokens', async () => {
    t = await startTestCloud({ db });
    const user = await signUp(t, 'a@example.com');
    const answer = await t.http.get('/v1/sites', { cookie: `os_session=${user.cookie}` });
    expect(answer.status).toBe(401);
    expect(answer.json.error.code).toBe('auth_required');
  });

  it('logs out: 204, the cookie is cleared and no longer works', async () => {
    t = await startTestCloud({ db });
    const user = await signUp(t, 'a@example.com');
    const cookie = `os_session=${user.cookie}`;
    const out = await t.http.post('/v1/auth/logout', undefined, { cookie });
    expect(out.status).toBe(204);
    expect(out.headers.getSetCookie()[0]).toMatch(
      /^os_session=; Path=\/; Max-Age=0; HttpOnly; Secure; SameSite=Lax$/,
    );
    const after = await t.http.post('/v1/tokens', { label: 'x', scope: 'read' }, { cookie });
    expect(after.status).toBe(401);
  });

  it('signs out everywhere: every session of the user ends, and the audit trail says so', async () => {
    t = await startTestCloud({ db });
    const user = await signUp(t, 'a@example.com');
    const code = codeFromMail(
      await (async () => {
        const mail = t.nextMail('a@example.com');
        await t.http.post('/v1/auth/request', { email: 'a@example.com' });
        return mail;
      })(),
    );
    const second = await t.http.post('/v1/auth/verify', { email: 'a@example.com', code });
    const otherCookie = `os_session=${second.cookie('os_session')}`;
    expect(
      (await t.http.post('/v1/auth/logout-all', undefined, { cookie: `os_session=${user.cookie}` })).status,
    ).toBe(204);
    for (const cookie of [`os_session=${user.cookie}`, otherCookie]) {
      expect((await t.http.post('/v1/tokens', { label: 'x', scope: 'read' }, { cookie })).status).toBe(401);
    }
    const audit = await t.http.get('/v1/accounts/me/audit?kind=sessions.revoked', { token: user.token });
    expect(audit.json.data).toEqual([
      expect.objectContaining({
        kind: 'sessions.revoked',
        by: user.userId,
        target: user.userId,
        details: { sessions: 2 },
      }),
    ]);
    // the API token is not a session: it keeps working
    expect((await t.http.get('/v1/sites', { token: user.token })).status).toBe(200);
  });

  it('rolls the 30-day expiry forward on every request and expires after 30 idle days', async () => {
    const clock = new ManualClock(T0);
    // The absolute lifetime out of the way: this is about the rolling one.
    t = await startTestCloud({ db, clock, env: { SESSION_MAX_DAYS: '365' } });
    const user = await signUp(t, 'a@example.com');
    const cookie = `os_session=${user.cookie}`;
    for (let i = 0; i < 3; i++) {
      clock.advanceMs(29 * 24 * 3600 * 1000);
      const used = await t.http.post('/v1/tokens', { label: `t${i}`, scope: 'read' }, { cookie });
      expect(used.status).toBe(201);
      expect(used.headers.getSetCookie()[0]).toMatch(/^os_session=.+; Max-Age=2592000;/);
    }
    clock.advanceMs(30 * 24 * 3600 * 1000 + 1000);
    const late = await t.http.post('/v1/tokens', { label: 'late', scope: 'read' }, { cookie });
    expect([late.status, late.json.error.code]).toEqual([401, 'auth_required']);
  });

  it('ends a session 30 days after sign-in however often it is used, answering as an idle one does', async () => {
    const clock = new ManualClock(T0);
    t = await startTestCloud({ db, clock });
    const user = await signUp(t, 'a@example.com');
    const cookie = `os_session=${user.cookie}`;
    for (let day = 6; day < 30; day += 6) {
      clock.set(T0 + day * DAY_MICROS);
      expect((await t.http.post('/v1/tokens', { label: `d${day}`, scope: 'read' }, { cookie })).status).toBe(
        201,
      );
    }
    clock.set(T0 + 30 * DAY_MICROS - 1_000_000);
    expect((await t.http.post('/v1/tokens', { label: 'last', scope: 'read' }, { cookie })).status).toBe(201);
    clock.set(T0 + 30 * DAY_MICROS);
    const tokens = await t.http.post('/v1/tokens', { label: 'late', scope: 'read' }, { cookie });
    expect([tokens.status, tokens.json.error.code]).toEqual([401, 'auth_required']);
    const everywhere = await t.http.post('/v1/auth/logout-all', undefined, { cookie });
    expect([everywhere.status, everywhere.json.error.code]).toEqual([401, 'auth_required']);
    // Signing in again gives a fresh 30 days.
    const again = await signUp(t, 'a@example.com');
    clock.set(T0 + 59 * DAY_MICROS);
    const fresh = await t.http.post(
      '/v1/tokens',
      { label: 'fresh', scope: 'read' },
      { cookie: `os_session=${again.cookie}` },
    );
    expect(fresh.status).toBe(201);
  });

  it('takes the absolute lifetime from SESSION_MAX_DAYS, in the verify answer and the cookie too', async () => {
    const clock = new ManualClock(T0);
    t = await startTestCloud({ db, clock, env: { SESSION_MAX_DAYS: '2' } });
    const mail = t.nextMail('a@example.com');
    await t.http.post('/v1/auth/request', { email: 'a@example.com' });
    const code = codeFromMail(await mail);
    const verified = await t.http.post('/v1/auth/verify', { email: 'a@example.com', code });
    expect(verified.json.expires_at).toBe(formatSeconds(T0 + 2 * DAY_MICROS));
    expect(verified.headers.getSetCookie()[0]).toMatch(/^os_session=[^;]+; Path=\/; Max-Age=172800; /);
    const cookie = `os_session=${verified.cookie('os_session')}`;
    clock.set(T0 + DAY_MICROS);
    const used = await t.http.post('/v1/tokens', { label: 'x', scope: 'read' }, { cookie });
    expect(used.status).toBe(201);
    // The refreshed cookie promises only what is left: one day.
    expect(used.headers.getSetCookie()[0]).toMatch(/; Max-Age=86400; /);
    clock.set(T0 + 2 * DAY_MICROS);
    const late = await t.http.post('/v1/tokens', { label: 'y', scope: 'read' }, { cookie });
    expect([late.status, late.json.error.code]).toEqual([401, 'auth_required']);
  });
});
