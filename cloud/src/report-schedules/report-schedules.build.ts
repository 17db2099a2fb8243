import type { AccountsRepository } from '../accounts/accounts.repository.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { Logger } from '../logger.ts';
import type { Mailer } from '../mail/mailer.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Config } from '../config.ts';
import type { Database, Db } from '../storage/database.ts';
import { ReportRecipientsRepository } from './report-recipients.repository.ts';
import { ReportRecipients } from './report-recipients.ts';
import { ReportSchedulesRepository } from './report-schedules.repository.ts';
import { ReportSchedules, type ReportMaker } from './report-schedules.service.ts';

/**
 * The report schedules and their jobs, registered on the job queue (the tick starts with the
 * cloud), and their recipients' answers.
 */
export function buildReportSchedules(deps: {
  config: Config;
  accounts: AccountsRepository;
  database: Database;
  db: Db;
  clock: Clock;
  log: Logger;
  jobs: JobQueue;
  mailer: Mailer;
  audit: AuditRepository;
  sites: SitesRepository;
  reports: ReportMaker;
}): { reportSchedules: ReportSchedules; reportRecipients: ReportRecipients } {
  const recipients = new ReportRecipients({
    ...deps,
    recipients: new ReportRecipientsRepository(),
    baseUrl: deps.config.baseUrl,
  });
  const schedules = new ReportSchedules({
    ...deps,
    log: deps.log.child({ module: 'report-schedules' }),
    schedules: new ReportSchedulesRepository(),
    recipients,
  });
  schedules.register();
  return { reportSchedules: schedules, reportRecipients: recipients };
}
