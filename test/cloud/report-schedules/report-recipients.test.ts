import { afterEach, describe, expect, it } from '@jest/globals';
import { sql } from 'kysely';
import { ManualClock } from '../../../cloud/src/clock.ts';
import type { SentMail } from '../../../cloud/src/mail/mailer.ts';
import {
  MAX_ASKS_PER_ADDRESS,
  MAX_ASKS_PER_DAY,
} from '../../../cloud/src/report-schedules/report-recipients.ts';
import { openDatabase } from '../../../cloud/src/storage/database.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { auditOf, createSite } from '../../helpers/fixtures.ts';
import { at, READ_ENV } from '../measurements/reads-helpers.ts';
import { answerOnPage, collectAsks, recipientPath } from './recipients-helpers.ts';

/** Tuesday 10 March 2026, noon UTC. */
const NOW = at('2026-03-10T12:00:00Z');
const DAY_MS = 24 * 3600 * 1000;
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

describe.each(DATABASES)('report recipients on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let clock: ManualClock;
  let asks: SentMail[];
  afterEach(async () => {
    await t?.stop();
  });

  async function start(): Promise<void> {
    clock = new ManualClock(NOW);
    t = await startTestCloud({ db, clock, env: READ_ENV });
    user = await signUp(t, 'owner@example.com');
    asks = collectAsks(t);
  }

  const schedule = async (siteId: string, recipients: string[], every = 'month') => {
    const answer = await t.http.post(
      '/v1/report-schedules',
      { site_id: siteId, template: 'haccp_monthly', language: 'en', every, recipients },
      { token: user.token },
    );
    await t.cloud.services.jobs.drain();
    return answer;
  };

  /** Report mails sent from now on, by recipient. */
  function collectReports(): string[] {
    const to: string[] = [];
    t.cloud.services.mailer.on('sent', (mail) => {
      if (mail.subject.startsWith('Report')) to.push(mail.to);
    });
    return to;
  }

  /** The scheduler's passes until nothing is left to do: the runs, the renders, the mails. */
  async function runMonth(until: string): Promise<void> {
    clock.set(at(until));
    for (let pass = 0; pass < 3; pass++) {
      await t.cloud.services.reportSchedules.tick();
      await t.cloud.services.jobs.drain();
    }
  }

  const statusOf = async (id: string) =>
    (await t.http.get(`/v1/report-schedules/${id}`, { token: user.token })).json.recipient_status;

  it('asks each new address once, mails only those who agreed (the account’s own users without asking), and stops on one click', async () => {
    await start();
    const site = await createSite(t, user.token, { name: 'Cold Store 1', timezone: 'Europe/Berlin' });
    const created = await schedule(site.id, ['owner@example.com', 'Inspector@Example.org', 'qa@example.com']);
    expect(created.status).toBe(201);
    expect(created.json.recipient_status).toEqual([
      { address: 'owner@example.com', status: 'confirmed' },
      { address: 'Inspector@Example.org', status: 'pending' },
      { address: 'qa@example.com', status: 'pending' },
    ]);

    // One mail asks each address that is not a user of the account; it says who asks, for what.
    expect(asks.map((m) => m.to).sort()).toEqual(['inspector@example.org', 'qa@example.com']);
    const ask = asks.find((m) => m.to === 'inspector@example.org')!;
    expect(ask.text).toContain(
      'owner@example.com would like to e-mail you a HACCP temperature report every month',
    );
    // No text the account chose (a site's name could say anything): the page names the sites.
    expect(ask.text).not.toContain('Cold Store 1');
    const inspectorPage = recipientPath(ask.text);

    // Opening the link (a person, a mail scanner, a preview) changes nothing.
    for (const method of ['GET', 'HEAD']) {
      const opened = await t.http.call(method, inspectorPage, undefined, { headers: { accept: '*/*' } });
      expect(opened.status).toBe(200);
      expect(opened.headers.get('content-type')).toMatch(/^text\/html/);
      expect(opened.headers.get('cache-control')).toBe('no-store');
      expect(opened.headers.get('referrer-policy')).toBe('same-origin');
    }
    const page = await t.http.get(inspectorPage, { headers: { accept: 'text/html' } });
    expect(page.text).toContain('Scheduled reports for inspector@example.org');
    expect(page.text).toContain('Asked by <strong>owner@example.com</strong>');
    expect(page.text).toContain('of the site “Cold Store 1”, every month');
    expect(page.text).toContain('value="confirm"');
    expect((await statusOf(created.json.id))[1]).toEqual({
      address: 'Inspector@Example.org',
      status: 'pending',
    });

    // Posted from the page by someone also signed in to the dashboard here: the cookie goes along.
    const confirmed = await t.http.post(inspectorPage, undefined, {
      raw: 'action=confirm',
      cookie: `os_session=${user.cookie}`,
      headers: {
        ...FORM,
        accept: 'text/html',
        origin: new URL(t.url).origin,
        'sec-fetch-site': 'same-origin',
      },
    });
    expect(confirmed.status).toBe(200);
    expect(confirmed.text).toContain('Thank you: you will receive these reports.');
    expect(confirmed.text).toContain('value="decline"');
    expect(confirmed.text).not.toContain('value="confirm"');
    expect((await statusOf(created.json.id))[1]).toEqual({
      address: 'Inspector@Example.org',
      status: 'confirmed',
    });
    expect(await auditOf(t, user.token, 'report_recipient.confirmed')).toMatchObject([
      { by: expect.stringMatching(/^rcn_/), details: { address: 'inspector@example.org' } },
    ]);

    // A second schedule within the week asks no one again; after a week, who has not answered is.
    await schedule(site.id, ['qa@example.com', 'inspector@example.org'], 'week');
    expect(asks).toHaveLength(2);
    clock.advanceMs(8 * DAY_MS);
    await schedule(site.id, ['qa@example.com', 'inspector@example.org'], 'week');
    expect(asks.map((m) => m.to)).toEqual([expect.any(String), expect.any(String), 'qa@example.com']);
    // The same link as the first time.
    expect(recipientPath(asks[2]!.text)).toBe(
      recipientPath(asks.find((m) => m.to === 'qa@example.com')!.text),
    );

    // March's report: the owner and the inspector get it; qa, who never answered, does not.
    const reports = collectReports();
    await runMonth('2026-03-31T22:06:00Z');
    expect(reports.filter((to) => to !== 'qa@example.com').length).toBeGreaterThan(0);
    const march = [...reports];
    expect(march).toContain('owner@example.com');
    expect(march).toContain('Inspector@Example.org');
    expect(march).not.toContain('qa@example.com');
    expect(
      t.logs.some((l) => l.msg === 'scheduled report not mailed to a recipient who has not confirmed'),
    ).toBe(true);

    // The mail program's one-click unsubscribe (RFC 8058): a multipart POST with no page and no origin.
    const multipart = new FormData();
    multipart.set('List-Unsubscribe', 'One-Click');
    const encoded = new Request('http://x/', { method: 'POST', body: multipart });
    const oneClick = await t.http.post(inspectorPage, undefined, {
      raw: Buffer.from(await encoded.arrayBuffer()),
      headers: { 'content-type': encoded.headers.get('content-type')! },
    });
    expect(oneClick.status).toBe(200);
    expect((await statusOf(created.json.id))[1]).toEqual({
      address: 'Inspector@Example.org',
      status: 'declined',
    });
    expect(await auditOf(t, user.token, 'report_recipient.declined')).toMatchObject([
      { details: { address: 'inspector@example.org' } },
    ]);
    reports.length = 0;
    await runMonth('2026-04-30T22:06:00Z');
    expect(reports.length).toBeGreaterThan(0);
    expect(reports).not.toContain('Inspector@Example.org');
    expect(reports).not.toContain('inspector@example.org');

    // A declined address is not asked again by a new schedule, and shows as declined.
    const again = await schedule(site.id, ['inspector@example.org']);
    expect(again.json.recipient_status).toEqual([{ address: 'inspector@example.org', status: 'declined' }]);
    expect(asks.filter((m) => m.to === 'inspector@example.org')).toHaveLength(1);
    // Its owner can change their mind on the same page.
    const declinedPage = await t.http.get(inspectorPage, { headers: { accept: 'text/html' } });
    expect(declinedPage.text).toContain('You receive no reports from this account.');
    expect((await answerOnPage(t, inspectorPage, 'confirm')).status).toBe(200);
    expect((await statusOf(again.json.id))[0].status).toBe('confirmed');
  });

  it('answers a link that opens nothing, and a form that says nothing, with clear errors', async () => {
    await start();
    const site = await createSite(t, user.token);
    await schedule(site.id, ['qa@example.com']);
    const path = recipientPath(asks[0]!.text);

    const unknown = '/app/report-mail/rcp_0123456789abcdefABCDEF0123456789abcdef';
    const html = await t.http.get(unknown, { headers: { accept: 'text/html' } });
    expect(html.status).toBe(404);
    expect(html.text).toContain('This link is not valid');
    for (const bad of [unknown, '/app/report-mail/nope', '/app/report-mail/ua_live_x']) {
      const json = await t.http.get(bad, { headers: { accept: 'application/json' } });
      expect([json.status, json.json.error.code]).toEqual([404, 'report_recipient_not_found']);
    }
    const posted = await t.http.post(unknown, undefined, {
      raw: 'action=confirm',
      headers: { ...FORM, accept: 'application/json' },
    });
    expect([posted.status, posted.json.error.code]).toEqual([404, 'report_recipient_not_found']);

    for (const raw of ['', 'action=subscribe', 'List-Unsubscribe=Yes']) {
      const refused = await t.http.post(path, undefined, { raw, headers: FORM });
      expect([refused.status, refused.json.error.code]).toEqual([400, 'invalid_request']);
      expect(refused.json.error.details).toEqual([{ path: 'action', message: 'must be confirm or decline' }]);
    }
    expect(
      (await t.http.get('/v1/report-schedules', { token: user.token })).json.data[0].recipient_status,
    ).toEqual([{ address: 'qa@example.com', status: 'pending' }]);
  });

  it(`asks at most ${MAX_ASKS_PER_DAY} addresses a day per account, asked again ones included, and the schedule that would pass it is not made`, async () => {
    await start();
    const site = await createSite(t, user.token);
    const addresses = (from: number) => Array.from({ length: 20 }, (_, i) => `r${from + i}@example.com`);
    expect((await schedule(site.id, addresses(0))).status).toBe(201);
    expect((await schedule(site.id, addresses(20))).status).toBe(201);
    // Addresses already asked cost nothing.
    expect((await schedule(site.id, addresses(0))).status).toBe(201);
    clock.advanceMs(3600_000);
    const refused = await schedule(site.id, addresses(40));
    expect([refused.status, refused.json.error.code]).toEqual([429, 'rate_limited']);
    // Until the first of the day's asks leaves the day: 23 hours.
    expect(refused.headers.get('retry-after')).toBe(String(23 * 3600));
    expect(refused.json.error.message).toContain(`at most ${MAX_ASKS_PER_DAY} new recipients a day`);
    expect(asks).toHaveLength(40);
    expect((await t.http.get('/v1/report-schedules', { token: user.token })).json.data).toHaveLength(3);
    // Ten more fit today; the next day, twenty do.
    expect((await schedule(site.id, addresses(40).slice(0, 10))).status).toBe(201);
    clock.advanceMs(DAY_MS);
    expect((await schedule(site.id, addresses(60))).status).toBe(201);
    expect(asks).toHaveLength(70);

    // A week on, addresses that never answered are asked again, and that counts too.
    clock.advanceMs(8 * DAY_MS);
    expect((await schedule(site.id, addresses(0))).status).toBe(201);
    expect((await schedule(site.id, addresses(20))).status).toBe(201);
    expect(asks).toHaveLength(110);
    const again = await schedule(site.id, addresses(40)); // 10 asked again, 10 new
    expect([again.status, again.json.error?.code]).toEqual([429, 'rate_limited']);
    expect(asks).toHaveLength(110);

    // Another account has its own budget.
    const other = await signUp(t, 'other@example.com');
    const otherSite = await createSite(t, other.token);
    const theirs = await t.http.post(
      '/v1/report-schedules',
      {
        site_id: otherSite.id,
        template: 'haccp_monthly',
        language: 'en',
        every: 'week',
        recipients: addresses(80),
      },
      { token: other.token },
    );
    expect(theirs.status).toBe(201);
    expect(theirs.json.recipient_status[0]).toEqual({ address: 'r80@example.com', status: 'pending' });
  });

  it(`asks one address at most ${MAX_ASKS_PER_ADDRESS} times a day, whichever accounts ask`, async () => {
    await start();
    const ask = async (n: number) => {
      const owner = await signUp(t, `owner${n}@example.net`);
      const site = await createSite(t, owner.token);
      return t.http.post(
        '/v1/report-schedules',
        {
          site_id: site.id,
          template: 'haccp_monthly',
          language: 'en',
          every: 'week',
          recipients: ['Victim@Example.org'],
        },
        { token: owner.token },
      );
    };
    for (let n = 0; n < MAX_ASKS_PER_ADDRESS; n++) expect((await ask(n)).status).toBe(201);
    const refused = await ask(MAX_ASKS_PER_ADDRESS);
    expect([refused.status, refused.json.error.code]).toEqual([429, 'rate_limited']);
    expect(refused.json.error.message).toBe(
      'victim@example.org was asked to confirm reports too often today; try again tomorrow',
    );
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    await t.cloud.services.jobs.drain();
    expect(asks.map((m) => m.to)).toEqual(Array(MAX_ASKS_PER_ADDRESS).fill('victim@example.org'));
  });

  it('never shows a recipient’s link token in an answer: schedules, their list, the audit trail', async () => {
    await start();
    const site = await createSite(t, user.token);
    const created = await schedule(site.id, ['qa@example.com']);
    const path = recipientPath(asks[0]!.text);
    const token = path.split('/').pop()!;
    expect((await answerOnPage(t, path, 'confirm')).status).toBe(200);
    for (const answer of [
      created,
      await t.http.get('/v1/report-schedules', { token: user.token }),
      await t.http.get(`/v1/report-schedules/${created.json.id}`, { token: user.token }),
      await t.http.get('/v1/accounts/me/audit', { token: user.token }),
    ]) {
      expect(answer.status).toBeLessThan(300);
      expect(answer.text).not.toContain(token);
      expect(answer.text).not.toContain('rcp_');
    }
  });

  it('keeps mailing the addresses of schedules made before recipients confirmed (migration 0017)', async () => {
    await start();
    const site = await createSite(t, user.token);
    const created = await schedule(site.id, [
      'Lab@Example.com',
      'lab@example.com',
      'owner@example.com',
      'x@example.org',
    ]);
    expect(created.status).toBe(201);
    // The database as it was before 0017: no table of answers.
    const { db: handle } = t.cloud.services;
    await sql`DROP TABLE report_recipients`.execute(handle);
    await sql`DELETE FROM schema_migrations WHERE name = '0017_report_recipients'`.execute(handle);
    // Rows written by older versions, with an address in two spellings: one answer per address.
    await sql`UPDATE report_schedules SET recipients = ${JSON.stringify([
      'Lab@Example.com',
      'owner@example.com',
      'x@example.org',
      'X@EXAMPLE.ORG',
    ])}`.execute(handle);
    const reopened = await openDatabase(t.database.url, { schema: t.database.schema });
    try {
      const rows = await reopened.db.selectFrom('report_recipients').selectAll().orderBy('address').execute();
      expect(rows.map((r) => [r.address, r.state, r.account_id])).toEqual([
        ['lab@example.com', 'confirmed', user.accountId],
        ['owner@example.com', 'confirmed', user.accountId],
        ['x@example.org', 'confirmed', user.accountId],
      ]);
      for (const r of rows) {
        expect(r.token).toMatch(/^rcp_[0-9a-f]{64}$/);
        expect(r.id).toMatch(/^rcn_[0-9a-f]{32}$/);
      }
      expect(new Set(rows.map((r) => r.token)).size).toBe(3);
    } finally {
      await reopened.close();
    }
    expect(await statusOf(created.json.id)).toEqual([
      { address: 'Lab@Example.com', status: 'confirmed' },
      { address: 'owner@example.com', status: 'confirmed' },
      { address: 'x@example.org', status: 'confirmed' },
      { address: 'X@EXAMPLE.ORG', status: 'confirmed' },
    ]);
  });
});
