import { buildAccounts } from './accounts/accounts.build.ts';
import type { AccountsRepository } from './accounts/accounts.repository.ts';
import { buildAudit } from './audit/audit.build.ts';
import type { AuditRepository } from './audit/audit.repository.ts';
import { buildAuth } from './auth/auth.build.ts';
import type { AuthRepository } from './auth/auth.repository.ts';
import type { AuthService } from './auth/auth.service.ts';
import type { Authenticator } from './auth/authenticator.ts';
import type { BridgesRepository } from './bridges/bridges.repository.ts';
import type { BridgesService } from './bridges/bridges.service.ts';
import type { Clock } from './clock.ts';
import type { Config } from './config.ts';
import { buildDevices } from './devices/devices.build.ts';
import type { DevicesRepository } from './devices/devices.repository.ts';
import type { DevicesService } from './devices/devices.service.ts';
import type { DeviceMoves } from './devices/moves.ts';
import { buildEvents } from './events/events.build.ts';
import type { EventsService } from './events/events.service.ts';
import { buildExport } from './export/export.build.ts';
import type { AccountExport } from './export/export.service.ts';
import { buildIngest } from './ingest/ingest.build.ts';
import type { Ingest } from './ingest/ingest.types.ts';
import { JobQueue } from './jobs/job-queue.ts';
import { IdempotencyStore } from './limits/idempotency.ts';
import { RateLimiter } from './limits/rate-limiter.ts';
import type { Logger } from './logger.ts';
import { MAIL_JOB, mailJobHandler } from './mail/mail-job.ts';
import { Mailer } from './mail/mailer.ts';
import { buildMeasurements } from './measurements/measurements.build.ts';
import type { MeasurementsRepository } from './measurements/measurements.repository.ts';
import type { MeasurementsService } from './measurements/measurements.service.ts';
import { buildMqtt } from './mqtt/mqtt.build.ts';
import type { MqttBridge } from './mqtt/mqtt-bridge.ts';
import type { BridgePki } from './pki/pki.ts';
import { buildRetention } from './retention/retention.build.ts';
import type { RetentionJob } from './retention/retention.ts';
import type { RuleEngine } from './rules/rule-engine.ts';
import { buildRules } from './rules/rules.build.ts';
import { buildSensors } from './sensors/sensors.build.ts';
import type { SensorsRepository } from './sensors/sensors.repository.ts';
import type { SensorsService } from './sensors/sensors.service.ts';
import { buildSilences } from './silences/silences.build.ts';
import type { SilencesService } from './silences/silences.service.ts';
import { buildSites } from './sites/sites.build.ts';
import type { SitesRepository } from './sites/sites.repository.ts';
import type { Database, Db } from './storage/database.ts';
import { buildTokens } from './tokens/tokens.build.ts';
import type { TokensRepository } from './tokens/tokens.repository.ts';
import type { TokensService } from './tokens/tokens.service.ts';
import { buildWebhooks } from './webhooks/webhooks.build.ts';
import type { WebhooksRepository } from './webhooks/webhooks.repository.ts';
import type { WebhooksService } from './webhooks/webhooks.service.ts';

/**
 * Every long-lived object of the cloud, built once and handed to the routes. Constructors only store
 * their dependencies; nothing here does I/O until `Cloud.start()`.
 */
export interface Services {
  config: Config;
  clock: Clock;
  log: Logger;
  database: Database;
  db: Db;
  mailer: Mailer;
  jobs: JobQueue;
  rateLimiter: RateLimiter;
  idempotency: IdempotencyStore;
  audit: AuditRepository;
  accounts: AccountsRepository;
  authRepository: AuthRepository;
  authService: AuthService;
  authenticator: Authenticator;
  tokensRepository: TokensRepository;
  tokens: TokensService;
  sites: SitesRepository;
  devicesRepository: DevicesRepository;
  devices: DevicesService;
  sensorsRepository: SensorsRepository;
  sensors: SensorsService;
  ingest: Ingest;
  /** The rule engine: states, alarm events, the tick; started by `Cloud.start()`. */
  rules: RuleEngine;
  events: EventsService;
  silences: SilencesService;
  webhooksRepository: WebhooksRepository;
  webhooks: WebhooksService;
  pki: BridgePki;
  bridgesRepository: BridgesRepository;
  bridges: BridgesService;
  /** The MQTT bridge endpoint; started by `Cloud.start()` unless MQTT_PORT is 0. */
  mqtt: MqttBridge;
  deviceMoves: DeviceMoves;
  measurementsRepository: MeasurementsRepository;
  measurements: MeasurementsService;
  retention: RetentionJob;
  accountExport: AccountExport;
}

export interface ServicesDeps {
  config: Config;
  clock: Clock;
  log: Logger;
  database: Database;
  jobPollMs?: number;
}

/** What every resource may build on: configuration, clock, logger, the database, mail, jobs, limits. */
function buildPlatform(deps: ServicesDeps) {
  const { config, clock, log, database } = deps;
  const db = database.db;
  const mailer = new Mailer({
    smtpUrl: config.smtpUrl,
    dataDir: config.dataDir,
    from: config.mailFrom,
    log: log.child({ module: 'mail' }),
  });
  const jobs = new JobQueue({ database, clock, log: log.child({ module: 'jobs' }), pollMs: deps.jobPollMs });
  jobs.register(MAIL_JOB, mailJobHandler(mailer));
  const rateLimiter = new RateLimiter({
    db,
    clock,
    log: log.child({ module: 'rate-limits' }),
    syncMs: config.rateLimitSyncMs,
  });
  const idempotency = new IdempotencyStore({ db, clock });
  return { config, clock, log, database, db, mailer, jobs, rateLimiter, idempotency };
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
 * Builds every resource's slice, in dependency order: a new resource adds its folder with a
 * `build<Resource>(deps)` and one line here.
 */
export function buildServices(deps: ServicesDeps): Services {
  return new Composition(buildPlatform(deps))
    .with(buildAudit)
    .with(buildAccounts)
    .with(buildTokens)
    .with(buildAuth)
    .with(buildSites)
    .with(buildDevices)
    .with(buildIngest)
    .with(buildWebhooks)
    .with(buildRules)
    .with(buildEvents)
    .with(buildSensors)
    .with(buildSilences)
    .with(buildMqtt)
    .with(buildMeasurements)
    .with(buildRetention)
    .with(buildExport).built;
}
