import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { DeviceMovesRepository } from '../devices/moves.repository.ts';
import type { DeviceMovesService } from '../devices/moves.service.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { Logger } from '../logger.ts';
import type { RuleEngine } from '../rules/rule-engine.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Database, Db } from '../storage/database.ts';
import { groupScan } from '../storage/group-scan.ts';
import type { WebhooksService } from '../webhooks/webhooks.service.ts';
import { ReportDataRepository } from './report-data.ts';
import { renderReport } from './report-pdf.ts';
import { ReportsRepository } from './reports.repository.ts';
import { ReportsService } from './reports.service.ts';

/** Reports: their slice of the services. Registers the job that renders them. */
export function buildReports(deps: {
  db: Db;
  database: Pick<Database, 'dialect'>;
  clock: Clock;
  log: Logger;
  jobs: JobQueue;
  sites: SitesRepository;
  audit: AuditRepository;
  webhooks: WebhooksService;
  deviceMoves: DeviceMovesService;
  rules: Pick<RuleEngine, 'settle'>;
}): { reports: ReportsService } {
  const { db, database, clock, log, jobs, sites, audit, webhooks, deviceMoves, rules } = deps;
  const moves = new DeviceMovesRepository();
  const reports = new ReportsService({
    db,
    clock,
    log: log.child({ module: 'reports' }),
    jobs,
    sites,
    audit,
    webhooks,
    reports: new ReportsRepository(),
    data: {
      data: new ReportDataRepository(groupScan(database.dialect)),
      placements: (trx, devices) => deviceMoves.placements(trx, devices),
      movesOf: (trx, ids) => moves.forDevices(trx, ids),
      auditChainHead: (trx, accountId) => audit.chainHead(trx, accountId),
      settle: (seqs) => rules.settle(seqs),
    },
    render: renderReport,
  });
  reports.register();
  return { reports };
}
