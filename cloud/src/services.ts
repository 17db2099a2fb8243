import { sql } from 'kysely';
import { buildAccounts } from './accounts/accounts.build.ts';
import { buildAlertRules } from './alert-rules/alert-rules.build.ts';
import { buildAudit } from './audit/audit.build.ts';
import { buildAuth } from './auth/auth.build.ts';
import type { Clock } from './clock.ts';
import type { Config } from './config.ts';
import { buildDevices } from './devices/devices.build.ts';
import { buildEvents } from './events/events.build.ts';
import { buildExport } from './export/export.build.ts';
import { buildHealth } from './health/health.build.ts';
import { buildIngest } from './ingest/ingest.build.ts';
import { buildLive } from './live/live.build.ts';
import { ChannelHub } from './hub/notification-hub.ts';
import { buildIntegrations } from './integrations/integrations.build.ts';
import { JobQueue } from './jobs/job-queue.ts';
import { IdempotencyStore } from './limits/idempotency.ts';
import { RateLimiter } from './limits/rate-limiter.ts';
import type { Logger } from './logger.ts';
import { MAIL_JOB, mailJobHandler } from './mail/mail-job.ts';
import { Mailer } from './mail/mailer.ts';
import { buildMetrics } from './metrics/metrics.build.ts';
import { buildMeasurements } from './measurements/measurements.build.ts';
import { buildMqtt } from './mqtt/mqtt.build.ts';
import { buildPublic } from './public/public.build.ts';
import { buildReportSchedules } from './report-schedules/report-schedules.build.ts';
import { buildReports } from './reports/reports.build.ts';
import { buildRetention } from './retention/retention.build.ts';
import { buildRules } from './rules/rules.build.ts';
import { buildSensors } from './sensors/sensors.build.ts';
import { buildSilences } from './silences/silences.build.ts';
import { buildSites } from './sites/sites.build.ts';
import type { Database } from './storage/database.ts';
import { DatabaseOutageLog } from './storage/outage-log.ts';
import { buildTokens } from './tokens/tokens.build.ts';
import { buildWebhooks } from './webhooks/webhooks.build.ts';

export interface ServicesDeps {
  config: Config;
  clock: Clock;
  log: Logger;
  database: Database;
  jobPollMs?: number;
}

/**
 * What every resource may build on: configuration, clock, logger, the database, mail, jobs, limits,
 * and the hub of change notifications (shared by the replicas through the database's notify channel).
 */
function buildPlatform(deps: ServicesDeps) {
  const { config, clock, log, database } = deps;
  const db = database.db;
  // A database outage in the log: one line when it starts, one when it ends (storage/outage-log.ts).
  const dbOutage = new DatabaseOutageLog({
    log: log.child({ module: 'database' }),
    probe: () => sql`SELECT 1`.execute(db),
  });
  const mailer = new Mailer({
    smtpUrl: config.smtpUrl,
    dataDir: config.dataDir,
    from: config.mailFrom,
    log: log.child({ module: 'mail' }),
  });
  const jobs = new JobQueue({
    database,
    clock,
    log: log.child({ module: 'jobs' }),
    pollMs: deps.jobPollMs,
    claimMs: config.jobClaimSeconds * 1000,
    dbOutage,
  });
  jobs.register(MAIL_JOB, mailJobHandler(mailer, clock, log.child({ module: 'mail' })));
  const rateLimiter = new RateLimiter({
    db,
    clock,
    log: log.child({ module: 'rate-limits' }),
    syncMs: config.rateLimitSyncMs,
  });
  const idempotency = new IdempotencyStore({ db, clock });
  const hubLog = log.child({ module: 'hub' });
  const hub = new ChannelHub({
    channel: database.notify,
    onError: (err, topic) => hubLog.error({ err, topic }, 'hub listener failed'),
  });
  return { config, clock, log, database, db, dbOutage, mailer, jobs, rateLimiter, idempotency, hub };
}

/**
 * Services built one slice at a time: each builder reads what the builders before it made (its
 * parameter type says which) and adds its own. The type grows with every slice, so a builder placed
 * before what it needs does not compile.
 */
class Composition<S extends object> {
  constructor(readonly built: S) {}

  with<T extends object>(build: (built: S) => T): Composition<S & T> {
    return new Composition(Object.assign(this.built, build(this.built)));
  }
}

/**
 * Every long-lived object of the cloud, built once and handed to the routes, one slice per resource
 * folder in dependency order: a new resource adds its folder with a `build<Resource>(deps)` and one
 * line here. Constructors only store their dependencies; nothing here does I/O until `Cloud.start()`.
 */
function composeServices(deps: ServicesDeps) {
  return new Composition(buildPlatform(deps))
    .with(buildMetrics)
    .with(buildAudit)
    .with(buildAccounts)
    .with(buildTokens)
    .with(buildAuth)
    .with(buildSites)
    .with(buildDevices)
    .with(buildIngest)
    .with(buildIntegrations)
    .with(buildWebhooks)
    .with(buildRules)
    .with(buildEvents)
    .with(buildSensors)
    .with(buildSilences)
    .with(buildMqtt)
    .with(buildMeasurements)
    .with(buildPublic)
    .with(buildRetention)
    .with(buildExport)
    .with(buildReports)
    .with(buildReportSchedules)
    .with(buildAlertRules)
    .with(buildLive)
    .with(buildHealth).built;
}

/** The services by name (`s.devices`, `s.rules`, ...): the slices of every builder together. */
export type Services = ReturnType<typeof composeServices>;

export function buildServices(deps: ServicesDeps): Services {
  return composeServices(deps);
}
