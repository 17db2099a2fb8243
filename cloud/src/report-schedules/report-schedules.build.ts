import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { Logger } from '../logger.ts';
import type { Mailer } from '../mail/mailer.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Database, Db } from '../storage/database.ts';
import { ReportSchedulesRepository } from './report-schedules.repository.ts';
import { ReportSchedules, type ReportMaker } from './report-schedules.service.ts';

/** The report schedules and their jobs, registered on the job queue; the tick starts with the cloud. */
export function buildReportSchedules(deps: {
  database: Database;
  db: Db;
  clock: Clock;
  log: Logger;
  jobs: JobQueue;
  mailer: Mailer;
  audit: AuditRepository;
  sites: SitesRepository;
  reports: ReportMaker;
}): { reportSchedules: ReportSchedules } {
  const schedules = new ReportSchedules({
    ...deps,
    log: deps.log.child({ module: 'report-schedules' }),
    schedules: new ReportSchedulesRepository(),
  });
  schedules.register();
  return { reportSchedules: schedules };
}
