import { createHash } from 'node:crypto';
import { DateTime } from 'luxon';
import { newId } from '../../../shared/ids.ts';
import { formatSeconds, formatSecondsOrNull } from '../../../shared/time.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { Conflict, notFound, Unprocessable } from '../errors.ts';
import type { UserPrincipal } from '../http/context.ts';
import type { PageRequest } from '../storage/keyset.ts';
import type { JobHandler, JobQueue, JobRow } from '../jobs/job-queue.ts';
import type { Logger } from '../logger.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';
import type { WebhooksService } from '../webhooks/webhooks.service.ts';
import { gatherReportInput, type ReportDataDeps } from './report-data.ts';
import type { ReportInput } from './report-input.ts';
import { checkTemplateAndLanguage } from './report-options.ts';
import type { ReportRow, ReportsRepository } from './reports.repository.ts';

export const REPORT_JOB = 'report.render';

/** Decisions, "Reports": a period is at most 366 days long. */
export const MAX_PERIOD_MICROS = 366 * 24 * 3600 * 1_000_000;

/** Attempts before a report is marked failed (a crash mid-render counts as one). */
const MAX_ATTEMPTS = 3;

/**
 * The claim on a report job, renewed while it renders: a replica that dies mid-render frees the
 * report for another (or for itself, restarted) within this long, or within JOB_CLAIM_SECONDS where
 * that is shorter.
 */
export const REPORT_LOCK_MS = 30_000;

export interface CreateReport {
  site_id: string;
  template: string;
  language: string;
  period: { from: number; to: number };
}

/** The report object (docs/api/reports.md). */
export function reportView(r: ReportRow) {
  return {
    id: r.id,
    site_id: r.site_id,
    template: r.template,
    period: { from: formatSeconds(r.period_from), to: formatSeconds(r.period_to) },
    language: r.language,
    state: r.state,
    error: r.error,
    created_at: formatSeconds(r.created_at),
    ready_at: formatSecondsOrNull(r.ready_at),
    size_bytes: r.size_bytes,
    sha256: r.sha256,
  };
}

/** `haccp_monthly-cold-store-1-2026-03.pdf`: template, site, and the period's month or days. */
export function reportFileName(r: ReportRow, siteName: string, timezone: string): string {
  const slug =
    siteName
      .normalize('NFKD')
      .replace(/[\u0300-\u036f]/g, '')
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 60) || 'site';
  const at = (micros: number) => DateTime.fromMillis(micros / 1000, { zone: timezone });
  const from = at(r.period_from);
  const last = at(r.period_to - 1);
  const wholeMonth =
    from.equals(from.startOf('month')) && at(r.period_to).equals(from.plus({ months: 1 }).startOf('month'));
  const period = wholeMonth
    ? from.toFormat('yyyy-MM')
    : from.hasSame(last, 'day')
      ? from.toFormat('yyyy-MM-dd')
      : `${from.toFormat('yyyy-MM-dd')}_${last.toFormat('yyyy-MM-dd')}`;
  return `${r.template}-${slug}-${period}.pdf`;
}

/**
 * Reports (docs/api/reports.md): a request is a row in `reports` and a job in the job table, in one
 * transaction; whichever replica claims the job gathers the data, renders the PDF, and stores it
 * with its size and SHA-256 in the database, then announces `report.ready`. A job interrupted by a
 * crash is claimed again once its lock expires, and starts over.
 */
export class ReportsService {
  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      log: Logger;
      jobs: JobQueue;
      reports: ReportsRepository;
      sites: SitesRepository;
      audit: AuditRepository;
      webhooks: WebhooksService;
      data: Omit<ReportDataDeps, 'db'>;
      render: (input: ReportInput) => Promise<Buffer>;
    },
  ) {}

  /** Registers the job that renders reports. */
  register(): void {
    this.deps.jobs.register(REPORT_JOB, this.jobHandler());
  }

  async create(by: Pick<UserPrincipal, 'accountId' | 'userId'>, input: CreateReport): Promise<ReportRow> {
    const { db, clock, jobs, reports, sites, audit } = this.deps;
    const now = clock.nowMicros();
    const row = await db.transaction().execute(async (trx) => {
      if (!(await sites.find(trx, by.accountId, input.site_id))) throw notFound('site');
      checkTemplateAndLanguage(input.template, input.language);
      const { from, to } = input.period;
      if (to <= from) {
        throw new Unprocessable('invalid_period', 'period.to must be after period.from', [
          { path: 'period.to', message: 'not after period.from' },
        ]);
      }
      if (to - from > MAX_PERIOD_MICROS) {
        throw new Unprocessable('invalid_period', 'a report period is at most 366 days long', [
          { path: 'period', message: 'longer than 366 days' },
        ]);
      }
      const report: ReportRow = {
        id: newId('rpt'),
        account_id: by.accountId,
        site_id: input.site_id,
        template: input.template,
        language: input.language,
        period_from: from,
        period_to: to,
        state: 'queued',
        error: null,
        created_at: now,
        ready_at: null,
        size_bytes: null,
        sha256: null,
        created_by: by.userId,
      };
      await reports.insert(trx, report);
      await jobs.enqueue(trx, REPORT_JOB, { report_id: report.id }, now);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'report.created',
        by: by.userId,
        target: report.id,
        details: {
          site_id: report.site_id,
          template: report.template,
          language: report.language,
          from: formatSeconds(from),
          to: formatSeconds(to),
        },
        ts: now,
      });
      return report;
    });
    jobs.kick();
    return row;
  }

  async siteExists(accountId: string, siteId: string): Promise<boolean> {
    return (await this.deps.sites.find(this.deps.db, accountId, siteId)) !== undefined;
  }

  async get(accountId: string, id: string): Promise<ReportRow> {
    const row = await this.deps.reports.find(this.deps.db, accountId, id);
    if (!row) throw notFound('report');
    return row;
  }

  async list(accountId: string, siteId: string | undefined, page: PageRequest): Promise<ReportRow[]> {
    return this.deps.reports.list(this.deps.db, accountId, siteId, page);
  }

  /** The PDF of a ready report and its file name; 409 `report_not_ready` before. */
  async file(
    accountId: string,
    id: string,
  ): Promise<{ report: ReportRow; content: Buffer; fileName: string }> {
    const { db, reports, data } = this.deps;
    const report = await this.get(accountId, id);
    const content = report.state === 'ready' ? await reports.file(db, id) : undefined;
    if (!content) {
      const why =
        report.state === 'ready'
          ? "the report's file was removed from the database"
          : report.state === 'failed'
            ? `the report failed: ${report.error ?? 'no reason recorded'}`
            : `the report is ${report.state}; poll it until its state is ready`;
      throw new Conflict('report_not_ready', why);
    }
    const site = await data.data.site(db, accountId, report.site_id);
    return {
      report,
      content,
      fileName: reportFileName(report, site?.name ?? report.site_id, site?.timezone ?? 'UTC'),
    };
  }

  private jobHandler(): JobHandler {
    return {
      maxAttempts: MAX_ATTEMPTS,
      retryDelayMs: (attempts) => 5_000 * attempts,
      lockMs: REPORT_LOCK_MS,
      priority: 1, // seconds of CPU: after mail
      run: (payload, job) => this.render((payload as { report_id: string }).report_id, job),
      // A report whose rendering ends its process each time (out of memory) fails, not queued for ever.
      abandoned: async (payload) => {
        const reportId = (payload as { report_id: string }).report_id;
        const report = await this.deps.reports.findById(this.deps.db, reportId);
        if (!report || report.state === 'ready' || report.state === 'failed') return;
        await this.deps.reports.setFailed(
          this.deps.db,
          reportId,
          `the report could not be made: its rendering stopped the server ${MAX_ATTEMPTS} times (too large a period or site?)`,
        );
      },
    };
  }

  /** Runs one attempt: running, gather, render, store, ready (or failed on the last attempt). */
  private async render(reportId: string, job: JobRow): Promise<void> {
    const { db, clock, log, reports, webhooks } = this.deps;
    const report = await reports.findById(db, reportId);
    if (!report || report.state === 'ready' || report.state === 'failed') return;
    await reports.setRunning(db, reportId);
    const started = Date.now();
    try {
      const input = await gatherReportInput({ db, ...this.deps.data }, report);
      const pdf = await this.deps.render(input);
      const sha256 = createHash('sha256').update(pdf).digest('hex');
      const now = clock.nowMicros();
      await db.transaction().execute(async (trx) => {
        await reports.setReady(trx, reportId, { content: pdf, sha256 }, now);
        const ready = { ...report, state: 'ready' as const, ready_at: now, size_bytes: pdf.length, sha256 };
        await webhooks.publish(trx, report.account_id, 'report.ready', reportView(ready), now);
      });
      webhooks.kick();
      log.info(
        { report_id: reportId, bytes: pdf.length, ms: Date.now() - started, attempt: job.attempts },
        'report ready',
      );
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (job.attempts >= MAX_ATTEMPTS) {
        await reports.setFailed(db, reportId, `the report could not be made: ${message}`);
      } else {
        await reports.setQueued(db, reportId, `attempt ${job.attempts} failed (${message}); retrying`);
      }
      throw err;
    }
  }
}
