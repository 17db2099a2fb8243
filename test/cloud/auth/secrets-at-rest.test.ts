import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import type { JobRow } from '../../../cloud/src/jobs/job-queue.ts';
import { codeFromMail, linkFromMail, signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';

const T0 = Date.UTC(2026, 0, 5, 10, 0, 0) * 1000;
const DAY_MS = 24 * 3600 * 1000;
const CODE = /\b[A-Z0-9]{3}-[A-Z0-9]{3}\b/;

describe.each(DATABASES)('secrets at rest on %s', (db) => {
  let t: TestCloud;
  afterEach(async () => t?.stop());

  async function mailJobs(): Promise<JobRow[]> {
    return t.cloud.services.db.selectFrom('jobs').selectAll().where('kind', '=', 'mail').execute();
  }

  /** Makes the outbox unwritable (a file where its folder goes), so every outbox delivery fails. */
  function blockOutbox(): string {
    const outbox = path.join(t.cloud.config.dataDir, 'outbox');
    fs.rmSync(outbox, { recursive: true, force: true });
    fs.writeFileSync(outbox, 'not a folder');
    return outbox;
  }

  it('keeps the sign-in code and link in the mail job only until the mail is sent', async () => {
    t = await startTestCloud({ db });
    const mail = t.nextMail('a@example.com');
    await t.http.post('/v1/auth/request', { email: 'a@example.com' });
    const sent = await mail;
    await t.cloud.services.jobs.drain();
    const code = codeFromMail(sent);
    const linkToken = new URL(linkFromMail(sent)).searchParams.get('t')!;
    const [job] = await mailJobs();
    expect(job!.done_at).not.toBeNull();
    expect(job!.payload).not.toContain(code);
    expect(job!.payload).not.toContain(linkToken);
    expect(JSON.parse(job!.payload)).toEqual({
      to: 'a@example.com',
      subject: 'Your sign-in code: [redacted]',
      text: expect.stringContaining('/app/auth/callback?t=[redacted]'),
    });
    // The code still signs in: only the job's copy is gone.
    expect((await t.http.post('/v1/auth/verify', { email: 'a@example.com', code })).status).toBe(200);
  });

  it('retries a failed mail with its code intact, clears it once sent, and clears a mail that expired unsent', async () => {
    const clock = new ManualClock(T0);
    t = await startTestCloud({ db, clock });
    const outbox = blockOutbox();
    await t.http.post('/v1/auth/request', { email: 'a@example.com' });
    await t.cloud.services.jobs.drain();
    const [failed] = await mailJobs();
    expect(failed).toMatchObject({ attempts: 1, done_at: null, failed_at: null });
    expect(failed!.last_error).toBeTruthy();
    expect(JSON.parse(failed!.payload).subject).toMatch(CODE);

    fs.rmSync(outbox);
    const mail = t.nextMail('a@example.com');
    clock.advanceMs(60_000);
    await t.cloud.services.jobs.drain();
    const code = codeFromMail(await mail);
    expect((await t.http.post('/v1/auth/verify', { email: 'a@example.com', code })).status).toBe(200);
    const [sent] = await mailJobs();
    expect(sent).toMatchObject({ attempts: 2, failed_at: null });
    expect(sent!.done_at).not.toBeNull();
    expect(sent!.payload).not.toContain(code);

    blockOutbox();
    await t.http.post('/v1/auth/request', { email: 'b@example.com' });
    for (let i = 0; i < 10; i++) {
      await t.cloud.services.jobs.drain();
      clock.advanceMs(3600_000);
    }
    // The code expired while the mail server was away: the mail ends unsent, its secrets cleared.
    const givenUp = (await mailJobs()).find((j) => j.id !== sent!.id)!;
    expect(givenUp).toMatchObject({ failed_at: null, done_at: expect.any(Number) });
    expect(JSON.parse(givenUp.payload).subject).toBe('Your sign-in code: [redacted]');
    expect(givenUp.payload).not.toMatch(/callback\?t=(?!\[redacted\])/);
  });

  it('removes finished jobs after JOB_RETENTION_DAYS (7 by default) and keeps pending ones', async () => {
    const clock = new ManualClock(T0);
    t = await startTestCloud({ db, clock });
    const { jobs, db: database } = t.cloud.services;
    await signUp(t, 'a@example.com');
    await jobs.drain();
    clock.set(T0 + 3 * DAY_MS * 1000);
    await signUp(t, 'b@example.com');
    await jobs.drain();
    const pending = await jobs.enqueue(
      database,
      'mail',
      { to: 'c@example.com', subject: 's', text: 't' },
      T0 + 30 * DAY_MS * 1000,
    );
    const ids = async () => (await mailJobs()).map((j) => j.id).sort();
    const [first, second] = (await mailJobs())
      .filter((j) => j.id !== pending)
      .sort((a, b) => a.created_at - b.created_at);
    clock.set(T0 + 7 * DAY_MS * 1000 - 1_000_000);
    await t.cloud.runMaintenance();
    expect(await ids()).toEqual([first!.id, second!.id, pending].sort());
    clock.set(T0 + 7 * DAY_MS * 1000 + 1_000_000);
    await t.cloud.runMaintenance();
    expect(await ids()).toEqual([second!.id, pending].sort());
  });

  it('honours JOB_RETENTION_DAYS', async () => {
    const clock = new ManualClock(T0);
    t = await startTestCloud({ db, clock, env: { JOB_RETENTION_DAYS: '1' } });
    await signUp(t, 'a@example.com');
    await t.cloud.services.jobs.drain();
    expect(await mailJobs()).toHaveLength(1);
    clock.set(T0 + DAY_MS * 1000 + 1_000_000);
    await t.cloud.runMaintenance();
    expect(await mailJobs()).toEqual([]);
  });
});
