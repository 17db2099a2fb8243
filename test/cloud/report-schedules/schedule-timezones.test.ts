import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import type { SentMail } from '../../../cloud/src/mail/mailer.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createSite } from '../../helpers/fixtures.ts';
import { at, READ_ENV } from '../measurements/reads-helpers.ts';

/** The account's own user: confirmed from the start, so its mails need no answer. */
const OWNER = 'owner@example.com';

interface Period {
  from: string;
  to: string;
}

describe.each(DATABASES)('report schedule periods in the site’s time zone on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let clock: ManualClock;
  let sent: SentMail[];
  afterEach(async () => {
    await t?.stop();
  });

  async function start(now: number): Promise<void> {
    clock = new ManualClock(now);
    t = await startTestCloud({ db, clock, env: READ_ENV });
    user = await signUp(t, OWNER);
    sent = [];
    t.cloud.services.mailer.on('sent', (mail) => {
      if (mail.subject.startsWith('Report')) sent.push(mail);
    });
  }

  /** One scheduler pass at `iso` and every job it leads to (report render, then the mails). */
  async function runSchedulerAt(iso: string): Promise<void> {
    clock.set(at(iso));
    for (let pass = 0; pass < 3; pass++) {
      await t.cloud.services.reportSchedules.tick();
      await t.cloud.services.jobs.drain();
    }
  }

  async function monthlySchedule(siteId: string, every = 'month'): Promise<string> {
    const created = await t.http.post(
      '/v1/report-schedules',
      { site_id: siteId, template: 'channel_summary', language: 'en', every, recipients: [OWNER] },
      { token: user.token },
    );
    expect(created.status).toBe(201);
    return created.json.id as string;
  }

  async function setTimezone(siteId: string, timezone: string): Promise<void> {
    const answer = await t.http.patch(`/v1/sites/${siteId}`, { timezone }, { token: user.token });
    expect(answer.status).toBe(200);
  }

  const nextRunAt = async (id: string) =>
    (await t.http.get(`/v1/report-schedules/${id}`, { token: user.token })).json.next_run_at as string;

  /** The periods of the reports made so far (of one site, or of all), oldest first. */
  async function periods(siteId?: string): Promise<Period[]> {
    const reports = (await t.http.get('/v1/reports', { token: user.token })).json.data as {
      site_id: string;
      period: Period;
    }[];
    return reports
      .filter((r) => siteId === undefined || r.site_id === siteId)
      .map((r) => r.period)
      .sort((a, b) => a.from.localeCompare(b.from));
  }

  const subjects = () => sent.map((m) => m.subject);

  it('follows a change of the site’s time zone to one east of it: no hour-long report, the next period is the new zone’s month', async () => {
    await start(at('2026-01-10T12:00:00Z'));
    const site = await createSite(t, user.token, { name: 'Bakery', timezone: 'UTC' });
    const id = await monthlySchedule(site.id);
    await runSchedulerAt('2026-02-01T00:06:00Z');
    // A second site's schedule, made in February, has no report yet when the zones change.
    const late = await createSite(t, user.token, { name: 'Kiosk', timezone: 'UTC' });
    const lateId = await monthlySchedule(late.id);
    expect(await nextRunAt(id)).toBe('2026-03-01T00:05:00Z');
    await setTimezone(site.id, 'Europe/Berlin');
    await setTimezone(late.id, 'Europe/Berlin');
    // February ends at midnight in Berlin, an hour before it does in UTC; the run stays due at the
    // time the schedule had, and ends the period at Berlin's midnight.
    expect(await nextRunAt(id)).toBe('2026-03-01T00:05:00Z');

    await runSchedulerAt('2026-03-01T00:06:00Z');
    expect(await nextRunAt(id)).toBe('2026-03-31T22:05:00Z');
    expect(await nextRunAt(lateId)).toBe('2026-03-31T22:05:00Z');
    await runSchedulerAt('2026-03-31T22:06:00Z');
    expect(await periods(site.id)).toEqual([
      { from: '2026-01-01T00:00:00Z', to: '2026-02-01T00:00:00Z' },
      // February begins where January's report ended (UTC) and ends at midnight in Berlin: an hour
      // shorter than 28 days, not one hour long.
      { from: '2026-02-01T00:00:00Z', to: '2026-02-28T23:00:00Z' },
      { from: '2026-02-28T23:00:00Z', to: '2026-03-31T22:00:00Z' },
    ]);
    // The first report of a schedule covers its whole period, in the zone the site has then.
    expect(await periods(late.id)).toEqual([
      { from: '2026-01-31T23:00:00Z', to: '2026-02-28T23:00:00Z' },
      { from: '2026-02-28T23:00:00Z', to: '2026-03-31T22:00:00Z' },
    ]);
    expect(subjects().sort()).toEqual([
      'Report: Bakery, 2026-01',
      'Report: Bakery, 2026-02',
      'Report: Bakery, 2026-03',
      'Report: Kiosk, 2026-02',
      'Report: Kiosk, 2026-03',
    ]);
  });

  it('follows a change of the site’s time zone to one west of it: waits for the new zone’s midnight, no overlapping report', async () => {
    await start(at('2026-01-10T12:00:00Z'));
    const site = await createSite(t, user.token, { name: 'Dairy', timezone: 'Europe/Berlin' });
    const id = await monthlySchedule(site.id);
    await runSchedulerAt('2026-01-31T23:06:00Z');
    expect(await periods()).toEqual([{ from: '2025-12-31T23:00:00Z', to: '2026-01-31T23:00:00Z' }]);
    await setTimezone(site.id, 'UTC');
    expect(await nextRunAt(id)).toBe('2026-03-01T00:05:00Z');

    // Midnight in Berlin, 23:00 in UTC: February has not ended at the site.
    await runSchedulerAt('2026-02-28T23:06:00Z');
    expect(await periods()).toHaveLength(1);
    expect(await nextRunAt(id)).toBe('2026-03-01T00:05:00Z');

    await runSchedulerAt('2026-03-01T00:06:00Z');
    await runSchedulerAt('2026-04-01T00:06:00Z');
    // February begins where January's report ended and ends at midnight UTC: an hour longer.
    expect(await periods()).toEqual([
      { from: '2025-12-31T23:00:00Z', to: '2026-01-31T23:00:00Z' },
      { from: '2026-01-31T23:00:00Z', to: '2026-03-01T00:00:00Z' },
      { from: '2026-03-01T00:00:00Z', to: '2026-04-01T00:00:00Z' },
    ]);
    expect(subjects()).toEqual([
      'Report: Dairy, 2026-01',
      'Report: Dairy, 2026-02',
      'Report: Dairy, 2026-03',
    ]);
  });

  it('follows a change of the site’s time zone for a weekly schedule', async () => {
    await start(at('2026-02-10T12:00:00Z')); // a Tuesday
    const site = await createSite(t, user.token, { name: 'Pharmacy', timezone: 'UTC' });
    const id = await monthlySchedule(site.id, 'week');
    await runSchedulerAt('2026-02-16T00:06:00Z');
    await setTimezone(site.id, 'America/New_York');
    expect(await nextRunAt(id)).toBe('2026-02-23T05:05:00Z');
    await runSchedulerAt('2026-02-23T00:06:00Z');
    expect(await periods()).toHaveLength(1);
    await runSchedulerAt('2026-02-23T05:06:00Z');
    await runSchedulerAt('2026-03-02T05:06:00Z');
    expect(await periods()).toEqual([
      { from: '2026-02-09T00:00:00Z', to: '2026-02-16T00:00:00Z' },
      { from: '2026-02-16T00:00:00Z', to: '2026-02-23T05:00:00Z' },
      { from: '2026-02-23T05:00:00Z', to: '2026-03-02T05:00:00Z' },
    ]);
    expect(subjects()).toEqual([
      'Report: Pharmacy, 2026-W07',
      'Report: Pharmacy, 2026-W08',
      'Report: Pharmacy, 2026-W09',
    ]);
  });

  it('reports the month after a first day whose midnight does not exist (America/Asuncion, 1 October 2023)', async () => {
    await start(at('2023-09-10T12:00:00Z'));
    const site = await createSite(t, user.token, { name: 'Asunción', timezone: 'America/Asuncion' });
    const id = await monthlySchedule(site.id);
    // 1 October begins at 01:00 -03:00: the clocks skip 00:00 -04:00.
    expect(await nextRunAt(id)).toBe('2023-10-01T04:05:00Z');
    await runSchedulerAt('2023-10-01T04:06:00Z');
    expect(await nextRunAt(id)).toBe('2023-11-01T03:05:00Z');
    await runSchedulerAt('2023-11-01T03:06:00Z');
    expect(await periods()).toEqual([
      { from: '2023-09-01T04:00:00Z', to: '2023-10-01T04:00:00Z' },
      { from: '2023-10-01T04:00:00Z', to: '2023-11-01T03:00:00Z' },
    ]);
    expect(subjects()).toEqual(['Report: Asunción, 2023-09', 'Report: Asunción, 2023-10']);
  });

  it('keeps the periods of a deleted site’s time zone for its failed run', async () => {
    await start(at('2026-03-10T12:00:00Z'));
    const site = await createSite(t, user.token, { name: 'Closed', timezone: 'Asia/Tokyo' });
    const id = await monthlySchedule(site.id);
    expect((await t.http.delete(`/v1/sites/${site.id}`, { token: user.token })).status).toBe(204);
    await runSchedulerAt('2026-04-01T00:00:00Z');
    const runs = await t.cloud.services.db
      .selectFrom('report_schedule_runs')
      .select(['schedule_id', 'period_from', 'period_to', 'error'])
      .execute();
    // March in Tokyo (UTC+9): 1 March 00:00 to 1 April 00:00 local time.
    expect(runs).toEqual([
      {
        schedule_id: id,
        period_from: at('2026-02-28T15:00:00Z'),
        period_to: at('2026-03-31T15:00:00Z'),
        error: expect.stringMatching(/^site_not_found/),
      },
    ]);
  });
});
