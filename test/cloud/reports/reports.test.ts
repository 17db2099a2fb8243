import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { REPORT_JOB } from '../../../cloud/src/reports/reports.service.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, tempDir } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { auditOf, createDevice, createSite } from '../../helpers/fixtures.ts';
import { at, ingestHttp, READ_ENV } from '../measurements/reads-helpers.ts';

const NOW = at('2026-04-02T09:00:00Z');
const MINUTE = 60_000_000;
const MARCH = { from: '2026-03-01T00:00:00+01:00', to: '2026-04-01T00:00:00+02:00' };

/** A real HTTP receiver on 127.0.0.1 that records what it is sent. */
async function receiver() {
  const received: { body: string }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ body: Buffer.concat(chunks).toString('utf8') });
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/reports`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The downloaded file, written to a temporary folder for poppler's tools. */
async function download(
  t: TestCloud,
  token: string,
  reportId: string,
): Promise<{ response: Response; bytes: Buffer; file: string }> {
  const response = await fetch(`${t.url}/v1/reports/${reportId}/file`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  const file = path.join(tempDir('sm-report-'), 'report.pdf');
  fs.writeFileSync(file, bytes);
  return { response, bytes, file };
}

function pdfinfo(file: string): Record<string, string> {
  const out = execFileSync('pdfinfo', ['-isodates', file]).toString('utf8');
  return Object.fromEntries(
    out
      .split('\n')
      .filter((l) => l.includes(':'))
      .map((l) => [l.slice(0, l.indexOf(':')).trim(), l.slice(l.indexOf(':') + 1).trim()]),
  );
}

describe.each(DATABASES)('reports on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let close: (() => Promise<void>) | null = null;
  afterEach(async () => {
    await close?.();
    close = null;
    await t?.stop();
  });

  async function start(env: Record<string, string> = {}): Promise<ManualClock> {
    const clock = new ManualClock(NOW);
    t = await startTestCloud({ db, clock, env: { ...READ_ENV, ...env } });
    user = await signUp(t, 'qa@example.com');
    return clock;
  }

  const create = (body: Record<string, unknown>, token = user.token) =>
    t.http.post('/v1/reports', body, { token });
  /** The HACCP report of March in English: what most tests here ask for. */
  const createMarch = (siteId: string) =>
    create({ site_id: siteId, template: 'haccp_monthly', language: 'en', period: MARCH });

  it('goes queued → ready as a job: the file is application/pdf with the stored size and sha256, announced by report.ready and audited as report.created', async () => {
    await start({ WEBHOOK_ALLOW_PRIVATE: 'true' });
    const r = await receiver();
    close = r.close;
    const hook = await t.http.post(
      '/v1/webhooks',
      { url: r.url, events: ['report.ready'] },
      { token: user.token },
    );
    expect(hook.status).toBe(201);
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

    // The runner is stopped so the report stays queued until the test drains it; a halted queue
    // runs one job per drain().
    const { jobs } = t.cloud.services;
    await jobs.stop();
    const created = await createMarch(site.id);
    expect(created.status).toBe(202);
    expect(created.json).toEqual({
      id: expect.stringMatching(/^rpt_/),
      site_id: site.id,
      template: 'haccp_monthly',
      period: { from: '2026-02-28T23:00:00Z', to: '2026-03-31T22:00:00Z' },
      language: 'en',
      state: 'queued',
      error: null,
      created_at: '2026-04-02T09:00:00Z',
      ready_at: null,
      size_bytes: null,
      sha256: null,
    });
    const id = created.json.id as string;
    expect((await t.http.get(`/v1/reports/${id}`, { token: user.token })).json.state).toBe('queued');
    const early = await t.http.get(`/v1/reports/${id}/file`, { token: user.token });
    expect([early.status, early.json.error.code]).toEqual([409, 'report_not_ready']);

    // The halted queue runs one job per drain: a job the setup queued (a mail, a notification) may
    // be due first on a slow machine.
    const ready = await eventually(async () => {
      await jobs.drain();
      const report = (await t.http.get(`/v1/reports/${id}`, { token: user.token })).json;
      return report.state === 'queued' ? null : report;
    }, 'the report job to run');
    expect(ready).toMatchObject({ id, state: 'ready', error: null, ready_at: '2026-04-02T09:00:00Z' });
    expect(ready.sha256).toMatch(/^[0-9a-f]{64}$/);

    const { response, bytes, file } = await download(t, user.token, id);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/pdf');
    expect(response.headers.get('content-disposition')).toBe(
      'attachment; filename="haccp_monthly-cold-store-1-2026-03.pdf"',
    );
    expect(bytes.subarray(0, 5).toString('latin1')).toBe('%PDF-');
    expect(bytes.length).toBe(ready.size_bytes);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(ready.sha256);
    expect(response.headers.get('etag')).toBe(`"${ready.sha256}"`);
    const info = pdfinfo(file);
    expect(Number(info.Pages)).toBeGreaterThanOrEqual(1);
    // The stored object is exactly what was served.
    const stored = await t.cloud.services.db
      .selectFrom('report_files')
      .select('content')
      .where('report_id', '=', id)
      .executeTakeFirstOrThrow();
    expect(Buffer.from(stored.content).equals(bytes)).toBe(true);

    // report.ready reached the receiver with the report object (the halted queue runs one job per
    // drain, and notifications the report's evaluation of the channels queued may come first).
    await eventually(async () => {
      await jobs.drain();
      return r.received.length > 0;
    }, 'the report.ready delivery');
    const delivered = r.received.map((m) => JSON.parse(m.body) as { type: string; data: { id: string } });
    expect(delivered.map((m) => [m.type, m.data.id])).toEqual([['report.ready', id]]);
    expect(delivered[0]!.data).toEqual(ready);

    const audit = await auditOf(t, user.token, 'report.created');
    expect(audit).toEqual([
      expect.objectContaining({
        kind: 'report.created',
        by: user.userId,
        target: id,
        details: {
          site_id: site.id,
          template: 'haccp_monthly',
          language: 'en',
          from: '2026-02-28T23:00:00Z',
          to: '2026-03-31T22:00:00Z',
        },
      }),
    ]);
  });

  it('lists reports newest first with the list envelope and paging, filtered by site_id', async () => {
    const clock = await start({ RATE_LIMIT_REPORT_PER_MIN: '1000' });
    const kitchen = await createSite(t, user.token, { name: 'Kitchen' });
    const bar = await createSite(t, user.token, { name: 'Bar' });
    const ids: string[] = [];
    for (const [i, site] of [kitchen, bar, kitchen].entries()) {
      clock.set(NOW + i * 1_000_000);
      const answer = await create({
        site_id: site.id,
        template: i === 1 ? 'channel_summary' : 'haccp_monthly',
        language: ['en', 'de', 'fr'][i],
        period: MARCH,
      });
      expect(answer.status).toBe(202);
      ids.push(answer.json.id);
    }
    const all = await t.http.get('/v1/reports', { token: user.token });
    expect(all.json.data.map((r: { id: string }) => r.id)).toEqual([...ids].reverse());
    expect(all.json).toMatchObject({ has_more: false, next_cursor: null });
    const first = await t.http.get('/v1/reports?limit=2', { token: user.token });
    expect(first.json.data.map((r: { id: string }) => r.id)).toEqual([ids[2], ids[1]]);
    expect(first.json.has_more).toBe(true);
    const second = await t.http.get(`/v1/reports?limit=2&cursor=${first.json.next_cursor}`, {
      token: user.token,
    });
    expect(second.json.data.map((r: { id: string }) => r.id)).toEqual([ids[0]]);
    const ofKitchen = await t.http.get(`/v1/reports?site_id=${kitchen.id}`, { token: user.token });
    expect(ofKitchen.json.data.map((r: { id: string }) => r.id)).toEqual([ids[2], ids[0]]);
    const unknown = await t.http.get('/v1/reports?site_id=site_nope', { token: user.token });
    expect([unknown.status, unknown.json.error.code]).toEqual([404, 'site_not_found']);
  });

  it('answers every error of the reports API with its status and code', async () => {
    await start({ RATE_LIMIT_REPORT_PER_MIN: '1000' });
    const site = await createSite(t, user.token);
    const good = { site_id: site.id, template: 'haccp_monthly', language: 'en', period: MARCH };
    const cases: [string, Record<string, unknown> | string, number, string][] = [
      ['unknown site', { ...good, site_id: 'site_nope' }, 404, 'site_not_found'],
      ['unknown template', { ...good, template: 'weekly_pretty' }, 422, 'unknown_template'],
      ['unknown language', { ...good, language: 'it' }, 422, 'unknown_language'],
      ['to before from', { ...good, period: { from: MARCH.to, to: MARCH.from } }, 422, 'invalid_period'],
      ['to equal to from', { ...good, period: { from: MARCH.from, to: MARCH.from } }, 422, 'invalid_period'],
      [
        'longer than 366 days',
        { ...good, period: { from: '2025-01-01T00:00:00Z', to: '2026-01-02T00:00:01Z' } },
        422,
        'invalid_period',
      ],
      ['no period', { ...good, period: undefined }, 400, 'invalid_request'],
      [
        'a period without an offset',
        { ...good, period: { from: '2026-03-01', to: MARCH.to } },
        400,
        'invalid_request',
      ],
      ['an unknown field', { ...good, format: 'docx' }, 400, 'invalid_request'],
      ['template not a string', { ...good, template: 7 }, 400, 'invalid_request'],
      ['malformed JSON', '{"site_id":', 400, 'bad_json'],
    ];
    for (const [what, body, status, code] of cases) {
      const answer =
        typeof body === 'string'
          ? await t.http.post('/v1/reports', undefined, {
              token: user.token,
              raw: body,
              headers: { 'content-type': 'application/json' },
            })
          : await create(body);
      expect([what, answer.status, answer.json?.error?.code]).toEqual([what, status, code]);
    }
    // exactly 366 days is allowed
    const longest = await create({
      ...good,
      period: { from: '2025-01-01T00:00:00Z', to: '2026-01-02T00:00:00Z' },
    });
    expect(longest.status).toBe(202);

    const missing = await t.http.get('/v1/reports/rpt_nope', { token: user.token });
    expect([missing.status, missing.json.error.code]).toEqual([404, 'report_not_found']);
    const missingFile = await t.http.get('/v1/reports/rpt_nope/file', { token: user.token });
    expect([missingFile.status, missingFile.json.error.code]).toEqual([404, 'report_not_found']);

    // scopes: read may look, write may create
    const read = await t.http.post('/v1/tokens', { label: 'r', scope: 'read' }, { token: user.token });
    const readToken = read.json.token as string;
    const refused = await create(good, readToken);
    expect([refused.status, refused.json.error.code]).toEqual([403, 'forbidden']);
    expect((await t.http.get(`/v1/reports/${longest.json.id}`, { token: readToken })).status).toBe(200);
    expect((await t.http.get('/v1/reports', { token: readToken })).status).toBe(200);
    const write = await t.http.post('/v1/tokens', { label: 'w', scope: 'write' }, { token: user.token });
    expect((await create(good, write.json.token)).status).toBe(202);
  });

  it('allows 4 report requests a minute per account: the 5th is 429 rate_limited with X-RateLimit-Report and Retry-After', async () => {
    const clock = await start();
    const site = await createSite(t, user.token);
    const body = { site_id: site.id, template: 'channel_summary', language: 'de', period: MARCH };
    clock.set(at('2026-04-02T09:00:10Z'));
    for (let i = 0; i < 4; i++) {
      const answer = await create(body);
      expect([answer.status, answer.headers.get('x-ratelimit-report')]).toEqual([202, '4']);
      expect(answer.headers.get('x-ratelimit-remaining')).toBe(String(3 - i));
    }
    const fifth = await create(body);
    expect([fifth.status, fifth.json.error.code]).toEqual([429, 'rate_limited']);
    expect(fifth.headers.get('x-ratelimit-report')).toBe('4');
    expect(fifth.headers.get('retry-after')).toBe('50');
    // another account has its own budget; reads are not counted against it
    const other = await signUp(t, 'other@example.com');
    const otherSite = await createSite(t, other.token);
    expect((await create({ ...body, site_id: otherSite.id }, other.token)).status).toBe(202);
    expect((await t.http.get('/v1/reports', { token: user.token })).status).toBe(200);
    // the next minute is a new window
    clock.set(at('2026-04-02T09:01:00Z'));
    expect((await create(body)).status).toBe(202);
  });

  it('retries a report whose making fails, then marks it failed with the reason in error', async () => {
    const clock = await start();
    const { db, jobs } = t.cloud.services;
    // A report whose site the job cannot find for its account (written behind the API's back:
    // the API never accepts one), so every attempt fails.
    const other = await signUp(t, 'elsewhere@example.com');
    const foreignSite = await createSite(t, other.token);
    await jobs.stop();
    const id = 'rpt_broken';
    await db
      .insertInto('reports')
      .values({
        id,
        account_id: user.accountId,
        site_id: foreignSite.id,
        template: 'haccp_monthly',
        language: 'en',
        period_from: at('2026-03-01T00:00:00Z'),
        period_to: at('2026-04-01T00:00:00Z'),
        state: 'queued',
        error: null,
        created_at: NOW,
        ready_at: null,
        size_bytes: null,
        sha256: null,
        created_by: user.userId,
      })
      .execute();
    await jobs.enqueue(db, REPORT_JOB, { report_id: id }, NOW);
    const state = async () => (await t.http.get(`/v1/reports/${id}`, { token: user.token })).json;

    await jobs.drain();
    expect(await state()).toMatchObject({
      state: 'queued',
      error: expect.stringMatching(/^attempt 1 failed/),
    });
    clock.advanceMs(5_000);
    await jobs.drain();
    expect(await state()).toMatchObject({
      state: 'queued',
      error: expect.stringMatching(/^attempt 2 failed/),
    });
    clock.advanceMs(10_000);
    await jobs.drain();
    const failed = await state();
    expect(failed).toMatchObject({ state: 'failed', ready_at: null, size_bytes: null, sha256: null });
    expect(failed.error).toMatch(/^the report could not be made: .*site/);
    const file = await t.http.get(`/v1/reports/${id}/file`, { token: user.token });
    expect([file.status, file.json.error.code]).toEqual([409, 'report_not_ready']);
    // nothing more is tried
    clock.advanceMs(3_600_000);
    await jobs.drain();
    expect((await state()).state).toBe('failed');
  });

  it('marks failed a report whose rendering ended the process on every attempt, instead of claiming it for ever', async () => {
    const clock = await start();
    const { db, jobs } = t.cloud.services;
    const site = await createSite(t, user.token);
    await jobs.stop();
    const created = await createMarch(site.id);
    expect(created.status).toBe(202);
    const id = created.json.id as string;
    // Three claims, each left as a process that died mid-render leaves it (out of memory).
    await db
      .updateTable('jobs')
      .set({ attempts: 3, locked_until: clock.nowMicros() })
      .where('kind', '=', REPORT_JOB)
      .execute();
    await db.updateTable('reports').set({ state: 'running' }).where('id', '=', id).execute();
    clock.advanceMs(1_000);
    const state = async () => (await t.http.get(`/v1/reports/${id}`, { token: user.token })).json;
    // The halted queue runs one job per drain; what the setup queued (a mail) may come first.
    for (let i = 0; i < 5 && (await state()).state !== 'failed'; i++) await jobs.drain();
    const failed = await state();
    expect(failed).toMatchObject({ state: 'failed', ready_at: null });
    expect(failed.error).toMatch(/stopped the server 3 times/);
    const job = await db
      .selectFrom('jobs')
      .selectAll()
      .where('kind', '=', REPORT_JOB)
      .executeTakeFirstOrThrow();
    expect(job).toMatchObject({ attempts: 4, failed_at: expect.any(Number), done_at: null });
  });
});
