import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { DeviceMovesService } from '../devices/moves.service.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { Logger } from '../logger.ts';
import { CHAT_POST_JOB, chatPostJobHandler } from '../notify/chat-post.ts';
import type { RuleEngine } from '../rules/rule-engine.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Database, Db } from '../storage/database.ts';
import type { WebhooksService } from '../webhooks/webhooks.service.ts';
import { AlertEngine } from './alert-engine.ts';
import { AlertEscalation } from './alert-escalation.ts';
import { AlertRulesRepository } from './alert-rules.repository.ts';
import { AlertRulesService } from './alert-rules.service.ts';

/**
 * Alert rules: the service behind the routes, the engine that follows the rule engine's
 * evaluations (started by `Cloud.start()`), and the escalation and chat jobs on the job queue.
 */
export function buildAlertRules(deps: {
  database: Database;
  db: Db;
  clock: Clock;
  config: Config;
  log: Logger;
  jobs: JobQueue;
  audit: AuditRepository;
  sites: SitesRepository;
  webhooks: WebhooksService;
  rules: RuleEngine;
  deviceMoves: DeviceMovesService;
}): { alertRules: AlertRulesService; alertEngine: AlertEngine } {
  const { database, db, clock, config, log, jobs, audit, sites, webhooks, rules, deviceMoves } = deps;
  const repository = new AlertRulesRepository();
  const escalation = new AlertEscalation({
    database,
    clock,
    jobs,
    webhooks,
    repository,
    baseUrl: config.baseUrl,
  });
  escalation.register();
  jobs.register(CHAT_POST_JOB, chatPostJobHandler(config.webhookAllowPrivate));
  const alertEngine = new AlertEngine({
    database,
    clock,
    log: log.child({ module: 'alert-rules' }),
    repository,
    announcer: escalation,
  });
  rules.follow(alertEngine);
  deviceMoves.follow(alertEngine);
  const alertRules = new AlertRulesService({
    db,
    clock,
    repository,
    sites,
    audit,
    listener: alertEngine,
    allowPrivateTargets: config.webhookAllowPrivate,
  });
  return { alertRules, alertEngine };
}
