import { DateTime } from 'luxon';
import { newId } from '../../../shared/ids.ts';
import { formatSeconds } from '../../../shared/time.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { ApiError, notFound } from '../errors.ts';
import type { UserPrincipal } from '../http/context.ts';
import type { PageRequest } from '../storage/keyset.ts';
import { OUTBOUND_RETRIES, type JobHandler, type JobQueue } from '../jobs/job-queue.ts';
import type { Logger } from '../logger.ts';
import type { Mailer } from '../mail/mailer.ts';
import { checkTemplateAndLanguage } from '../reports/report-options.ts';
import type { ReportsService } from '../reports/reports.service.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import { lockedTransaction, type Database, type Db } from '../storage/database.ts';
import type { RecipientState } from './report-recipients.repository.ts';
import type { ReportRecipients } from './report-recipients.ts';
import type {
  ReportScheduleRow,
  ReportSchedulesRepository,
  ScheduleRunRow,
} from './report-schedules.repository.ts';
import {
  nearestPeriodBoundary,
  periodEndAfter,
  periodEndingAt,
  periodLabel,
  RUN_DELAY_MICROS,
  type ScheduleEvery,
} from './schedule-periods.ts';

/** Makes the report of a claimed run (creates it, or finds the one an earlier attempt made). */
export const SCHEDULE_RUN_JOB = 'report_schedule.run';
/** Mails a finished report of a run to one recipient. */
export const SCHEDULE_MAIL_JOB = 'report_schedule.mail';

/** At most this many recipients per schedule. */
export const MAX_RECIPIENTS = 20;

/** The claims need no advisory lock: their conditional UPDATEs decide which replica wins. */
const NO_LOCK_KEYS = { namespace: 'none', keys: [] };

/** Due schedules and finished runs handled per tick (the rest at the next). */
const TICK_BATCH = 100;

export interface CreateSchedule {
  site_id: string;
  template: string;
  language: string;
  every: ScheduleEvery;
  recipients: string[];
}

/**
 * The schedule object (docs/api/report-schedules.md), with each recipient's answer from `states`
 * (by lower-cased address; `pending` for an address with no answer recorded).
 */
export function scheduleView(s: ReportScheduleRow, states: ReadonlyMap<string, RecipientState>) {
  const recipients = JSON.parse(s.recipients) as string[];
  return {
    id: s.id,
    site_id: s.site_id,
    template: s.template,
    language: s.language,
    every: s.every,
    recipients,
    recipient_status: recipients.map((address) => ({
      address,
      status: states.get(address.toLowerCase()) ?? 'pending',
    })),
    created_at: formatSeconds(s.created_at),
    next_run_at: formatSeconds(s.next_run_at),
  };
}

/** What the schedules need of the report service: making a report, reading it and its file. */
export type ReportMaker = Pick<ReportsService, 'create' | 'get' | 'file'>;

/**
 * Scheduled reports (docs/api/report-schedules.md). A tick (every minute, on every replica) does two
 * things, each claimed in the database so that it happens once however many replicas tick:
 *
 * 1. A schedule whose period has ended (plus RUN_DELAY_MICROS) is claimed by moving it on to the
 *    next period with a conditional UPDATE; the same transaction records the run and queues its job,
 *    which creates the report through the report service (and so its render job).
 * 2. A run whose report is finished is claimed by setting `mailed_at` conditionally; the same
 *    transaction queues one mail job per recipient, which attaches the PDF.
 *
 * The jobs are retried from the job table after a crash; the run job finds the report an earlier
 * attempt made (reports made by a schedule name it as their creator), so a period gets one report.
 */
export class ReportSchedules {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly deps: {
      /** For the claims: a transaction that takes the write lock first (processes sharing SQLite). */
      database: Database;
      db: Db;
      clock: Clock;
      log: Logger;
      jobs: JobQueue;
      mailer: Mailer;
      audit: AuditRepository;
      sites: SitesRepository;
      schedules: ReportSchedulesRepository;
      recipients: ReportRecipients;
      reports: ReportMaker;
      /** How often the tick runs (default one minute). */
      tickMs?: number;
    },
  ) {}

  register(): void {
    this.deps.jobs.register(SCHEDULE_RUN_JOB, this.runJob());
    this.deps.jobs.register(SCHEDULE_MAIL_JOB, this.mailJob());
  }

  start(): void {
    this.timer = setInterval(() => {
      this.tick().catch((err: unknown) => this.deps.log.error({ err }, 'report schedule tick failed'));
    }, this.deps.tickMs ?? 60_000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  async create(
    by: Pick<UserPrincipal, 'accountId' | 'userId'>,
    input: CreateSchedule,
  ): Promise<ReportScheduleRow> {
    const { db, clock, sites, schedules, audit } = this.deps;
    const now = clock.nowMicros();
    const recipients = distinctAddresses(input.recipients);
    return db.transaction().execute(async (trx) => {
      const site = await sites.hold(trx, by.accountId, input.site_id);
      if (!site) throw notFound('site');
      checkTemplateAndLanguage(input.template, input.language);
      const periodEnd = periodEndAfter(now, input.every, site.timezone);
      const row: ReportScheduleRow = {
        id: newId('rsc'),
        account_id: by.accountId,
        site_id: site.id,
        template: input.template,
        language: input.language,
        every: input.every,
        recipients: JSON.stringify(recipients),
        created_by: by.userId,
        created_at: now,
        next_period_end: periodEnd,
        next_run_at: periodEnd + RUN_DELAY_MICROS,
      };
      await schedules.insert(trx, row);
      await this.deps.recipients.ask(trx, by, recipients, { template: row.template, every: row.every });
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'report_schedule.created',
        by: by.userId,
        target: row.id,
        details: {
          site_id: row.site_id,
          template: row.template,
          language: row.language,
          every: row.every,
          recipients,
        },
        ts: now,
      });
      return row;
    });
  }

  async get(accountId: string, id: string): Promise<ReportScheduleRow> {
    const row = await this.deps.schedules.find(this.deps.db, accountId, id);
    if (!row) throw notFound('report_schedule');
    return (await this.inCurrentZone([row]))[0]!;
  }

  async list(accountId: string, page: PageRequest): Promise<ReportScheduleRow[]> {
    return this.inCurrentZone(await this.deps.schedules.list(this.deps.db, accountId, page));
  }

  /**
   * The rows with their next period's end at the boundary of the site's current time zone, which is
   * where the next run ends the period (`claimDueRuns`), also when the site's zone changed after the
   * row was stored. `next_run_at` is when that run happens: 5 minutes after that end, or the stored
   * time when that is later (the scheduler finds a schedule by its stored time).
   */
  private async inCurrentZone(rows: ReportScheduleRow[]): Promise<ReportScheduleRow[]> {
    const zones = new Map<string, string>();
    for (const row of rows) {
      if (!zones.has(row.site_id)) zones.set(row.site_id, await this.timezoneOf(row));
    }
    return rows.map((row) => {
      const end = nearestPeriodBoundary(
        row.next_period_end,
        row.every as ScheduleEvery,
        zones.get(row.site_id)!,
      );
      return { ...row, next_period_end: end, next_run_at: Math.max(row.next_run_at, end + RUN_DELAY_MICROS) };
    });
  }

  /** The recipients' answers of these schedules of one account, for `scheduleView`. */
  async recipientStates(
    accountId: string,
    rows: readonly ReportScheduleRow[],
  ): Promise<Map<string, RecipientState>> {
    const addresses = rows.flatMap((r) => JSON.parse(r.recipients) as string[]);
    return this.deps.recipients.states(this.deps.db, accountId, addresses);
  }

  /** The account's schedules that name this address, as its recipient's page lists them. */
  async forRecipient(
    accountId: string,
    address: string,
  ): Promise<{ siteName: string; template: string; every: string }[]> {
    const { db, schedules, sites } = this.deps;
    const naming = (await schedules.allOf(db, accountId)).filter((s) =>
      (JSON.parse(s.recipients) as string[]).some((a) => a.toLowerCase() === address),
    );
    return Promise.all(
      naming.map(async (s) => ({
        siteName: (await sites.find(db, accountId, s.site_id))?.name ?? s.site_id,
        template: s.template,
        every: s.every,
      })),
    );
  }

  /** Deletes the schedule; runs it already claimed still make their report, and are not mailed. */
  async delete(by: Pick<UserPrincipal, 'accountId' | 'userId'>, id: string): Promise<void> {
    const { db, clock, schedules, audit } = this.deps;
    await db.transaction().execute(async (trx) => {
      const row = await schedules.find(trx, by.accountId, id);
      if (!row) throw notFound('report_schedule');
      await schedules.delete(trx, row.id);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'report_schedule.deleted',
        by: by.userId,
        target: row.id,
        details: { site_id: row.site_id, template: row.template, every: row.every },
        ts: clock.nowMicros(),
      });
    });
  }

  /** One pass: claims the due runs, then the mailings of finished reports. Concurrent calls share it. */
  tick(): Promise<void> {
    this.running ??= (async () => {
      try {
        await this.claimDueRuns();
        await this.claimMailings();
      } finally {
        this.running = null;
      }
    })();
    return this.running;
  }

  private async claimDueRuns(): Promise<void> {
    const { database, db, clock, jobs, schedules, log } = this.deps;
    const now = clock.nowMicros();
    let claimed = 0;
    for (const schedule of await schedules.due(db, now, TICK_BATCH)) {
      const timezone = await this.timezoneOf(schedule);
      const every = schedule.every as ScheduleEvery;
      // `next_period_end` is a boundary in the site's time zone when it was stored; the site's zone
      // may have changed since. The period ends at the same boundary in the current zone.
      const end = nearestPeriodBoundary(schedule.next_period_end, every, timezone);
      if (end + RUN_DELAY_MICROS > now) {
        // The boundary in the current zone is later: the period has not ended there yet. The
        // schedule waits for it (the same conditional UPDATE as a claim, so one replica moves it).
        await schedules.claimRun(db, schedule.id, schedule.next_period_end, {
          periodEnd: end,
          runAt: end + RUN_DELAY_MICROS,
        });
        continue;
      }
      const nextEnd = periodEndAfter(end, every, timezone);
      const period = await lockedTransaction(database, NO_LOCK_KEYS, async (trx) => {
        if (
          !(await schedules.claimRun(trx, schedule.id, schedule.next_period_end, {
            periodEnd: nextEnd,
            runAt: nextEnd + RUN_DELAY_MICROS,
          }))
        )
          return null;
        const period = periodOf(end, await schedules.lastPeriodEnd(trx, schedule.id), every, timezone);
        const run: ScheduleRunRow = {
          id: newId('rsr'),
          schedule_id: schedule.id,
          account_id: schedule.account_id,
          period_from: period.from,
          period_to: period.to,
          recipients: schedule.recipients,
          report_id: null,
          mailed_at: null,
          error: null,
          created_at: now,
        };
        await schedules.insertRun(trx, run);
        await jobs.enqueue(trx, SCHEDULE_RUN_JOB, { run_id: run.id }, now);
        return period;
      });
      if (period) {
        claimed += 1;
        log.info(
          { schedule_id: schedule.id, from: formatSeconds(period.from), to: formatSeconds(period.to) },
          'scheduled report due',
        );
      }
    }
    if (claimed > 0) jobs.kick();
  }

  /**
   * The time zone of the schedule's site, also of a deleted site (its run then fails with
   * site_not_found); UTC only when the site's row is gone altogether.
   */
  private async timezoneOf(schedule: Pick<ReportScheduleRow, 'account_id' | 'site_id'>): Promise<string> {
    return (
      (await this.deps.schedules.siteTimezone(this.deps.db, schedule.account_id, schedule.site_id)) ?? 'UTC'
    );
  }

  private async claimMailings(): Promise<void> {
    const { database, db, clock, jobs, schedules } = this.deps;
    let queued = 0;
    for (const run of await schedules.toMail(db, TICK_BATCH)) {
      const now = clock.nowMicros();
      await lockedTransaction(database, NO_LOCK_KEYS, async (trx) => {
        if (!(await schedules.claimMailing(trx, run.id, now))) return;
        // A schedule deleted after its run was claimed: its recipients asked for no more mail.
        if (!(await schedules.findById(trx, run.schedule_id))) return;
        for (const to of JSON.parse(run.recipients) as string[]) {
          await jobs.enqueue(trx, SCHEDULE_MAIL_JOB, { run_id: run.id, to }, now);
          queued += 1;
        }
      });
    }
    if (queued > 0) jobs.kick();
  }

  private runJob(): JobHandler {
    return {
      run: async (payload) => {
        const { db, schedules, reports, log } = this.deps;
        const run = await schedules.findRun(db, (payload as { run_id: string }).run_id);
        if (!run || run.report_id !== null || run.error !== null) return;
        const schedule = await schedules.findById(db, run.schedule_id);
        let reportId = await schedules.reportOfRun(db, run);
        if (!reportId) {
          if (!schedule) return;
          try {
            const report = await reports.create(
              // The schedule is the report's creator: the audit entry says so, and a retry finds it.
              { accountId: run.account_id, userId: schedule.id },
              {
                site_id: schedule.site_id,
                template: schedule.template,
                language: schedule.language,
                period: { from: run.period_from, to: run.period_to },
              },
            );
            reportId = report.id;
          } catch (err) {
            // A refusal (the site was deleted) does not change on retry: the run records why.
            if (!(err instanceof ApiError) || err.status >= 500) throw err;
            log.warn(
              { run_id: run.id, schedule_id: run.schedule_id, code: err.code },
              'scheduled report refused',
            );
            await schedules.setRunError(db, run.id, `${err.code}: ${err.message}`);
            return;
          }
        }
        await schedules.setRunReport(db, run.id, reportId);
      },
    };
  }

  private mailJob(): JobHandler {
    return {
      ...OUTBOUND_RETRIES,
      run: async (payload) => {
        const { db, schedules, reports, mailer, sites, recipients, log } = this.deps;
        const { run_id, to } = payload as { run_id: string; to: string };
        const run = await schedules.findRun(db, run_id);
        if (!run?.report_id) return;
        // Asked when it sends, not when it was queued: an answer in between counts.
        const recipient = await recipients.confirmed(db, run.account_id, to);
        if (!recipient) {
          log.info(
            { run_id, schedule_id: run.schedule_id },
            'scheduled report not mailed to a recipient who has not confirmed',
          );
          return;
        }
        const stop = recipients.link(recipient);
        const headers = {
          'List-Unsubscribe': `<${stop}>`,
          'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
        };
        const report = await reports.get(run.account_id, run.report_id);
        const site = await sites.find(db, run.account_id, report.site_id);
        const timezone = await this.timezoneOf({ account_id: run.account_id, site_id: report.site_id });
        const siteName = site?.name ?? report.site_id;
        const every = (await schedules.findById(db, run.schedule_id))?.every as ScheduleEvery | undefined;
        const label = periodLabel({ from: run.period_from, to: run.period_to }, every ?? 'month', timezone);
        const span = `${localTime(run.period_from, timezone)} to ${localTime(run.period_to, timezone)} (${timezone})`;
        if (report.state !== 'ready') {
          await mailer.send({
            to,
            subject: `Report could not be made: ${siteName}, ${label}`,
            text: [
              `The scheduled ${report.template} report of site "${siteName}" for ${span} could not be made.`,
              '',
              `Report: ${report.id}`,
              `Reason: ${report.error ?? 'unknown'}`,
              '',
              footer(stop),
            ].join('\n'),
            headers,
          });
          return;
        }
        const { content, fileName } = await reports.file(run.account_id, report.id);
        await mailer.send({
          to,
          subject: `Report: ${siteName}, ${label}`,
          text: [
            `The scheduled ${report.template} report of site "${siteName}" for ${span} is attached (${fileName}).`,
            '',
            `Report: ${report.id}`,
            `SHA-256 of the PDF: ${report.sha256}`,
            `Size: ${content.length} bytes`,
            '',
            footer(stop),
          ].join('\n'),
          headers,
          attachments: [{ filename: fileName, content, contentType: 'application/pdf' }],
        });
      },
    };
  }
}

function footer(stopLink: string): string {
  return `You receive this mail because a report schedule names your address and you agreed to it. To stop these reports: ${stopLink}`;
}

/**
 * The period of the run that ends at the boundary `end`: from where the schedule's previous run
 * ended, so that periods neither overlap nor leave a gap when the site's time zone changed in
 * between (that period is then longer or shorter than a month or week by the change of the UTC
 * offset). Before the first run, or when the previous run ended elsewhere than at the previous
 * boundary, the whole month or week before `end` in the current zone.
 */
function periodOf(
  end: number,
  lastEnd: number | undefined,
  every: ScheduleEvery,
  timezone: string,
): { from: number; to: number } {
  const whole = periodEndingAt(end, every, timezone);
  if (
    lastEnd !== undefined &&
    lastEnd < end &&
    nearestPeriodBoundary(lastEnd, every, timezone) === whole.from
  ) {
    return { from: lastEnd, to: end };
  }
  return whole;
}

function localTime(micros: number, timezone: string): string {
  return DateTime.fromMillis(micros / 1000, { zone: timezone }).toFormat('yyyy-MM-dd HH:mm ZZ');
}

/** Each address once, as first written: an address given twice (in any case) gets one mail. */
function distinctAddresses(addresses: readonly string[]): string[] {
  const seen = new Set<string>();
  return addresses.filter((a) => {
    const key = a.toLowerCase();
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
