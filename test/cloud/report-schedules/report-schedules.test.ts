import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import type { SentMail } from '../../../cloud/src/mail/mailer.ts';
import { ReportSchedulesRepository } from '../../../cloud/src/report-schedules/report-schedules.repository.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, tempDir } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { auditOf, createDevice, createSite } from '../../helpers/fixtures.ts';
import { startSmtpServer } from '../../helpers/smtp.ts';
import { at, ingestHttp, READ_ENV } from '../measurements/reads-helpers.ts';
import { answerAsks, collectAsks } from './recipients-helpers.ts';

/** Tuesday 10 March 2026, noon UTC. */
const NOW = at('2026-03-10T12:00:00Z');
const MINUTE = 60_000_000;
const RECIPIENTS = ['qa@example.com', 'inspector@example.org'];

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** The attachments of an `.eml` file the outbox holds: MIME parts with a file name, base64-decoded. */
function attachmentsOf(message: string): { filename: string; contentType: string; content: Buffer }[] {
  const eml = message.replace(/\r\n/g, '\n');
  const boundary = /boundary="?([^"\n;]+)"?/.exec(eml)?.[1];
  if (!boundary) return [];
  return eml
    .split(`--${boundary}`)
    .map((part) => {
      const split = part.indexOf('\n\n');
      const headers = part.slice(0, split).replace(/\n[ \t]+/g, ' ');
      const filename = /filename="?([^"\n;]+)"?/i.exec(headers)?.[1];
      if (!filename || !/Content-Transfer-Encoding: base64/i.test(headers)) return null;
      return {
        filename,
        contentType: /Content-Type: ([^;\n]+)/i.exec(headers)![1]!.trim(),
        content: Buffer.from(part.slice(split + 2).replace(/\s+/g, ''), 'base64'),
      };
    })
    .filter((a) => a !== null);
}

describe.each(DATABASES)('report schedules on %s', (db) => {
  let t: TestCloud;
  let replica: TestCloud | null = null;
  let user: SignedIn;
  let clock: ManualClock;
  let asks: SentMail[];
  let closeSmtp: (() => Promise<void>) | null = null;
  afterEach(async () => {
    await closeSmtp?.();
    closeSmtp = null;
    await replica?.stop();
    replica = null;
    await t?.stop();
  });

  async function start(now = NOW, env: Record<string, string> = {}): Promise<void> {
    clock = new ManualClock(now);
    t = await startTestCloud({ db, clock, env: { ...READ_ENV, ...env } });
    user = await signUp(t, 'owner@example.com');
    asks = collectAsks(t);
  }

  const schedule = (body: Record<string, unknown>, token = user.token) =>
    t.http.post('/v1/report-schedules', body, { token });

  /** Every report mail the cloud sends from now on (alarm mails aside), as the outbox files it. */
  function collectMail(cloud: TestCloud): SentMail[] {
    const sent: SentMail[] = [];
    cloud.cloud.services.mailer.on('sent', (mail) => {
      if (mail.subject.startsWith('Report')) sent.push(mail);
    });
    return sent;
  }

  /** One scheduler pass and every job it leads to (report render, then the mails), on each replica. */
  async function runScheduler(clouds: TestCloud[]): Promise<void> {
    for (let pass = 0; pass < 2; pass++) {
      // On PostgreSQL the replicas claim at the same moment. Two replicas in one process cannot
      // write one SQLite file at once (better-sqlite3 waits for a lock synchronously, blocking the
      // event loop the holder needs to commit), so there they take turns, as the job runners do.
      if (db === 'postgres') await Promise.all(clouds.map((c) => c.cloud.services.reportSchedules.tick()));
      else for (const c of clouds) await c.cloud.services.reportSchedules.tick();
      for (const c of clouds) await c.cloud.services.jobs.drain();
    }
  }

  it('makes last month’s report after the month ends in the site’s time zone and mails it as a PDF, once, with two replicas', async () => {
    await start();
    const site = await createSite(t, user.token, { name: 'Cold Store 1', timezone: 'Europe/Berlin' });
    const device = await createDevice(t, user.token, site.id, { name: 'Walk-in fridge' });
    await ingestHttp(
      t,
      device,
      Array.from({ length: 30 }, (_, i) => ({
        ts: at('2026-03-10T08:00:00Z') + i * MINUTE,
        value: 3 + (i % 3),
      })),
    );
    const created = await schedule({
      site_id: site.id,
      template: 'haccp_monthly',
      language: 'de',
      every: 'month',
      recipients: RECIPIENTS,
    });
    expect(created.status).toBe(201);
    // March ends at local midnight, 2026-04-01T00:00+02:00; the run is due 5 minutes later.
    expect(created.json).toEqual({
      id: expect.stringMatching(/^rsc_[0-9A-Za-z]{20,}$/),
      site_id: site.id,
      template: 'haccp_monthly',
      language: 'de',
      every: 'month',
      recipients: RECIPIENTS,
      recipient_status: RECIPIENTS.map((address) => ({ address, status: 'pending' })),
      created_at: '2026-03-10T12:00:00Z',
      next_run_at: '2026-03-31T22:05:00Z',
    });
    await answerAsks(t, asks, RECIPIENTS);
    expect(await auditOf(t, user.token, 'report_schedule.created')).toMatchObject([
      { target: created.json.id, by: user.userId, details: { site_id: site.id, every: 'month' } },
    ]);

    const second = await startTestCloud({ db, clock, env: READ_ENV, sameDatabaseAs: t });
    replica = second;
    const mails = [...[t, replica].map(collectMail)];
    const reports = async () => (await t.http.get('/v1/reports', { token: user.token })).json.data;

    // A run is claimed by the one UPDATE that still finds the schedule at the period's end.
    const { db: database } = t.cloud.services;
    const repository = new ReportSchedulesRepository();
    const row = (await repository.findById(database, created.json.id))!;
    const end = row.next_period_end;
    const moved = { periodEnd: end + 1, runAt: row.next_run_at };
    const claims = await Promise.all(
      [database, replica.cloud.services.db].map((handle) => repository.claimRun(handle, row.id, end, moved)),
    );
    expect(claims.sort()).toEqual([false, true]);
    // Back to where it was, for the scheduler to claim below.
    expect(
      await repository.claimRun(database, row.id, end + 1, { periodEnd: end, runAt: row.next_run_at }),
    ).toBe(true);

    // One microsecond before the run is due: nothing happens.
    clock.set(at('2026-03-31T22:05:00Z') - 1);
    await runScheduler([t, replica]);
    expect(await reports()).toEqual([]);

    clock.set(at('2026-03-31T22:06:00Z'));
    await runScheduler([t, replica]);
    const made = await reports();
    expect(made).toHaveLength(1);
    expect(made[0]).toMatchObject({
      site_id: site.id,
      template: 'haccp_monthly',
      language: 'de',
      period: { from: '2026-02-28T23:00:00Z', to: '2026-03-31T22:00:00Z' },
      state: 'ready',
    });
    const file = await fetch(`${t.url}/v1/reports/${made[0].id}/file`, {
      headers: { authorization: `Bearer ${user.token}` },
    });
    const pdf = Buffer.from(await file.arrayBuffer());
    expect(sha256(pdf)).toBe(made[0].sha256);

    // The mailing is claimed by the first tick that finds the report finished; which pass that is
    // depends on which replica's job runner rendered it, so passes run until the mails are out.
    const sent = await eventually(async () => {
      await runScheduler([t, second]);
      const all = mails.flat();
      return all.length >= RECIPIENTS.length ? all : null;
    }, 'the report mailed to every recipient');
    expect(sent.map((m) => m.to).sort()).toEqual([...RECIPIENTS].sort());
    for (const mail of sent) {
      expect(mail.subject).toBe('Report: Cold Store 1, 2026-03');
      const eml = fs.readFileSync(mail.file!, 'utf8');
      const body = eml.replace(/=\n/g, '');
      expect(body).toContain(`Report: ${made[0].id}`);
      expect(body).toContain(made[0].sha256);
      // Every report mail can stop the next ones: a link, and one click in the mail program.
      const unfolded = eml.replace(/\n[ \t]+/g, ' ');
      expect(unfolded).toMatch(/^List-Unsubscribe: <https?:\/\/[^>]+\/app\/report-mail\/rcp_[0-9A-Za-z]+>$/m);
      expect(unfolded).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click$/m);
      expect(body).toMatch(/To stop these reports: https?:\/\/\S+\/app\/report-mail\/rcp_/);
      const [attachment, ...more] = attachmentsOf(eml);
      expect(more).toEqual([]);
      expect(attachment!.contentType).toBe('application/pdf');
      expect(attachment!.filename).toMatch(/^haccp_monthly-cold-store-1-2026-03\.pdf$/);
      expect(sha256(attachment!.content)).toBe(made[0].sha256);
    }
    // The PDF prints the audit chain's head as it was when the report was made: the report.created
    // entry, the newest one, which the chain verification names too.
    const verified = await t.http.get('/v1/audit/verify', { token: user.token });
    expect(verified.json).toMatchObject({
      ok: true,
      head: { hash: expect.stringMatching(/^[0-9a-f]{64}$/) },
    });
    const pdfFile = path.join(tempDir('sm-schedule-'), 'report.pdf');
    fs.writeFileSync(pdfFile, pdf);
    const printed = execFileSync('pdftotext', [pdfFile, '-']).toString('utf8').replace(/\s+/g, '');
    expect(printed).toContain(verified.json.head.hash);
    expect(printed).toContain(verified.json.head.id);

    // The report names the schedule as its creator.
    expect(await auditOf(t, user.token, 'report.created')).toMatchObject([
      { target: made[0].id, by: created.json.id },
    ]);

    // The schedule moved on to April; later passes before then change nothing.
    const after = await t.http.get(`/v1/report-schedules/${created.json.id}`, { token: user.token });
    expect(after.json.next_run_at).toBe('2026-04-30T22:05:00Z');
    clock.set(at('2026-04-15T00:00:00Z'));
    await runScheduler([t, replica]);
    expect(await reports()).toHaveLength(1);
    expect(mails.flat()).toHaveLength(RECIPIENTS.length);
  });

  it('makes the past ISO week’s report (Monday to Monday, local), catches up a missed period, and mails through SMTP', async () => {
    const smtp = await startSmtpServer();
    closeSmtp = () => smtp.close();
    await start(at('2026-03-04T15:00:00Z'), { SMTP_URL: smtp.url }); // a Wednesday
    const site = await createSite(t, user.token, { name: 'Pharmacy', timezone: 'America/New_York' });
    const created = await schedule({
      site_id: site.id,
      template: 'channel_summary',
      language: 'en',
      every: 'week',
      recipients: ['pharmacist@example.com', 'Pharmacist@Example.com'], // one address, one mail
    });
    expect(created.status).toBe(201);
    expect(created.json.recipients).toEqual(['pharmacist@example.com']);
    await answerAsks(t, asks, ['pharmacist@example.com']);
    // Monday 9 March, 00:00 EDT (New York moved to summer time on Sunday 8 March).
    expect(created.json.next_run_at).toBe('2026-03-09T04:05:00Z');
    const sent = collectMail(t);
    // Two weeks pass without a scheduler pass: each week gets its report.
    clock.set(at('2026-03-16T05:00:00Z'));
    await runScheduler([t]);
    await runScheduler([t]);
    const made = (await t.http.get('/v1/reports', { token: user.token })).json.data as {
      period: { from: string; to: string };
      state: string;
      sha256: string;
    }[];
    expect(made.map((r) => r.period).sort((a, b) => a.from.localeCompare(b.from))).toEqual([
      { from: '2026-03-02T05:00:00Z', to: '2026-03-09T04:00:00Z' },
      { from: '2026-03-09T04:00:00Z', to: '2026-03-16T04:00:00Z' },
    ]);
    expect(made.map((r) => r.state)).toEqual(['ready', 'ready']);
    expect(sent.map((m) => m.subject).sort()).toEqual([
      'Report: Pharmacy, 2026-W10',
      'Report: Pharmacy, 2026-W11',
    ]);
    // The SMTP server received both, each with its report's PDF.
    const attached = smtp.received
      .filter((raw) => raw.includes('Subject: Report: Pharmacy'))
      .flatMap((raw) => attachmentsOf(raw))
      .map((a) => sha256(a.content))
      .sort();
    expect(attached).toEqual(made.map((r) => r.sha256).sort());
  });

  it('mails nothing for a schedule deleted before its run or whose site is gone, and lists, reads and deletes schedules', async () => {
    await start();
    const site = await createSite(t, user.token);
    const body = {
      site_id: site.id,
      template: 'haccp_monthly',
      language: 'fr',
      every: 'month',
      recipients: RECIPIENTS,
    };
    const first = (await schedule(body)).json;
    clock.advanceMs(1000);
    const second = (await schedule({ ...body, every: 'week' })).json;
    const list = await t.http.get('/v1/report-schedules?limit=1', { token: user.token });
    expect(list.status).toBe(200);
    expect(list.json).toEqual({ data: [first], next_cursor: expect.any(String), has_more: true });
    const rest = await t.http.get(`/v1/report-schedules?limit=1&cursor=${list.json.next_cursor}`, {
      token: user.token,
    });
    expect(rest.json).toEqual({ data: [second], next_cursor: null, has_more: false });

    const deleted = await t.http.delete(`/v1/report-schedules/${first.id}`, { token: user.token });
    expect(deleted.status).toBe(204);
    expect(
      (await t.http.get(`/v1/report-schedules/${first.id}`, { token: user.token })).json.error.code,
    ).toBe('report_schedule_not_found');
    expect(await auditOf(t, user.token, 'report_schedule.deleted')).toMatchObject([{ target: first.id }]);
    await t.http.delete(`/v1/report-schedules/${second.id}`, { token: user.token });
    // A schedule whose site is deleted makes no report: its run records why.
    const gone = await createSite(t, user.token, { name: 'Closed kitchen' });
    const orphan = (await schedule({ ...body, site_id: gone.id })).json;
    expect((await t.http.delete(`/v1/sites/${gone.id}`, { token: user.token })).status).toBe(204);
    const sent = collectMail(t);
    clock.set(at('2026-04-02T00:00:00Z'));
    await runScheduler([t]);
    expect((await t.http.get('/v1/reports', { token: user.token })).json.data).toEqual([]);
    expect(sent).toEqual([]);
    const runs = await t.cloud.services.db
      .selectFrom('report_schedule_runs')
      .select(['schedule_id', 'report_id', 'error', 'mailed_at'])
      .execute();
    expect(runs).toEqual([
      {
        schedule_id: orphan.id,
        report_id: null,
        error: expect.stringMatching(/^site_not_found/),
        mailed_at: null,
      },
    ]);
  });

  it('answers every error of the schedules API with its status and code', async () => {
    await start();
    const site = await createSite(t, user.token);
    const other = await signUp(t, 'other@example.com');
    const foreign = await createSite(t, other.token);
    const ok = {
      site_id: site.id,
      template: 'haccp_monthly',
      language: 'en',
      every: 'month',
      recipients: RECIPIENTS,
    };
    const cases: [Record<string, unknown>, number, string][] = [
      [{ ...ok, site_id: foreign.id }, 404, 'site_not_found'],
      [{ ...ok, site_id: 'site_nope', every: 'year' }, 404, 'site_not_found'],
      [{ ...ok, template: 'daily_poster' }, 422, 'unknown_template'],
      [{ ...ok, language: 'it' }, 422, 'unknown_language'],
      [{ ...ok, every: 'day' }, 400, 'invalid_request'],
      [{ ...ok, recipients: [] }, 400, 'invalid_request'],
      [{ ...ok, recipients: ['not-an-address'] }, 400, 'invalid_request'],
      [{ ...ok, recipients: 'qa@example.com' }, 400, 'invalid_request'],
      [
        { ...ok, recipients: Array.from({ length: 21 }, (_, i) => `r${i}@example.com`) },
        400,
        'invalid_request',
      ],
      [{ ...ok, extra: true }, 400, 'invalid_request'],
    ];
    for (const [body, status, code] of cases) {
      const answer = await schedule(body);
      expect({ body, status: answer.status, code: answer.json?.error?.code }).toEqual({ body, status, code });
    }
    expect(
      (await schedule({ ...ok, recipients: Array.from({ length: 20 }, (_, i) => `r${i}@example.com`) }))
        .status,
    ).toBe(201);
    for (const call of [
      t.http.get('/v1/report-schedules/rsc_nope', { token: user.token }),
      t.http.delete('/v1/report-schedules/rsc_nope', { token: user.token }),
    ]) {
      const answer = await call;
      expect([answer.status, answer.json.error.code]).toEqual([404, 'report_schedule_not_found']);
    }
    const readOnly = await t.http.post('/v1/tokens', { label: 'r', scope: 'read' }, { token: user.token });
    const refused = await schedule(ok, readOnly.json.token);
    expect([refused.status, refused.json.error.code]).toEqual([403, 'forbidden']);
    expect((await t.http.get('/v1/report-schedules', { token: readOnly.json.token })).status).toBe(200);
  });
});
