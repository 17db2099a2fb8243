import { AccountsRepository } from './accounts/accounts.repository.ts';
import { AuditRepository } from './audit/audit.repository.ts';
import { AuthRepository } from './auth/auth.repository.ts';
import { AuthService } from './auth/auth.service.ts';
import { Authenticator } from './auth/authenticator.ts';
import { BridgeDevices } from './bridges/bridge-devices.ts';
import { BridgesRepository } from './bridges/bridges.repository.ts';
import { BridgesService } from './bridges/bridges.service.ts';
import type { Clock } from './clock.ts';
import type { Config } from './config.ts';
import { DevicesRepository } from './devices/devices.repository.ts';
import { DevicesService } from './devices/devices.service.ts';
import { EventsRepository } from './events/events.repository.ts';
import { EventsService } from './events/events.service.ts';
import { ExportRepository } from './export/export.repository.ts';
import { AccountExport } from './export/export.service.ts';
import { DeviceMoves, DeviceMovesRepository } from './devices/moves.ts';
import { DEVICE_STATE_JOB, IngestCore } from './ingest/ingest.core.ts';
import type { DeviceStateChange } from './ingest/ingest.types.ts';
import { PostgresIngestStore } from './ingest/ingest.store.postgres.ts';
import { SqliteIngestStore } from './ingest/ingest.store.sqlite.ts';
import type { Ingest, IngestStore } from './ingest/ingest.types.ts';
import { JobQueue } from './jobs/job-queue.ts';
import { IdempotencyStore } from './limits/idempotency.ts';
import { RateLimiter } from './limits/rate-limiter.ts';
import type { Logger } from './logger.ts';
import { MeasurementsRepository } from './measurements/measurements.repository.ts';
import { MeasurementsService } from './measurements/measurements.service.ts';
import { MAIL_JOB, mailJobHandler } from './mail/mail-job.ts';
import { Mailer } from './mail/mailer.ts';
import { AlarmMailAndWebhooks } from './notify/alarm-notifier.ts';
import { MqttBridge } from './mqtt/mqtt-bridge.ts';
import { BridgePki } from './pki/pki.ts';
import { buildReports } from './reports/reports.build.ts';
import type { ReportsService } from './reports/reports.service.ts';
import { buildReportSchedules } from './report-schedules/build.ts';
import type { ReportSchedules } from './report-schedules/report-schedules.service.ts';
import { RetentionJob } from './retention/retention.ts';
import { RuleEngine } from './rules/rule-engine.ts';
import { RulesRepository } from './rules/rules.repository.ts';
import { SensorsRepository } from './sensors/sensors.repository.ts';
import { SensorsService } from './sensors/sensors.service.ts';
import { SilencesService } from './silences/silences.service.ts';
import { SitesRepository } from './sites/sites.repository.ts';
import type { Database, Db } from './storage/database.ts';
import { TokensRepository } from './tokens/tokens.repository.ts';
import { TokensService } from './tokens/tokens.service.ts';
import { WebhookDeliveryJob } from './webhooks/webhook-delivery.ts';
import { WebhooksRepository } from './webhooks/webhooks.repository.ts';
import { DELIVERY_JOB, WebhooksService } from './webhooks/webhooks.service.ts';

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
  reports: ReportsService;
  reportSchedules: ReportSchedules;
}

/** The ingest hot path uses each database's own driver directly (the one dialect branch of ingest). */
function ingestStoreFor(database: Database): IngestStore {
  if (database.sqlite) return new SqliteIngestStore(database.db, database.sqlite);
  if (database.pool) return new PostgresIngestStore(database.pool);
  throw new Error('no database handle for ingest');
}

export function buildServices(deps: {
  config: Config;
  clock: Clock;
  log: Logger;
  database: Database;
  jobPollMs?: number;
}): Services {
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
  const audit = new AuditRepository();
  const accounts = new AccountsRepository();
  const authRepository = new AuthRepository();
  const authService = new AuthService({
    db,
    clock,
    config,
    auth: authRepository,
    accounts,
    audit,
    jobs,
    rateLimiter,
  });
  const tokensRepository = new TokensRepository();
  const authenticator = new Authenticator({ db, clock, tokens: tokensRepository, authService });
  const tokens = new TokensService({ db, clock, tokens: tokensRepository, audit });
  const sites = new SitesRepository();
  const devicesRepository = new DevicesRepository();
  const sensorsRepository = new SensorsRepository();
  const devices = new DevicesService({ db, clock, config, devices: devicesRepository, sites, audit });
  const webhooksRepository = new WebhooksRepository();
  const webhooks = new WebhooksService({ db, clock, config, webhooks: webhooksRepository, audit, jobs });
  jobs.register(
    DELIVERY_JOB,
    new WebhookDeliveryJob({
      db,
      clock,
      log: log.child({ module: 'webhooks' }),
      webhooks: webhooksRepository,
      allowPrivate: config.webhookAllowPrivate,
    }),
  );
  const rules = new RuleEngine({
    database,
    clock,
    log: log.child({ module: 'rules' }),
    repository: new RulesRepository(),
    notifier: new AlarmMailAndWebhooks({ config, jobs, accounts, webhooks }),
    catchUp: () => ingest.catchUp(),
  });
  const events = new EventsService({ db, clock, events: new EventsRepository(), sites, audit, webhooks });
  const sensors = new SensorsService({
    db,
    clock,
    sensors: sensorsRepository,
    audit,
    ruleChanges: rules,
    settle: (seqs) => rules.settle(seqs),
  });
  const silences = new SilencesService({ db, clock, sensors: sensorsRepository, audit, engine: rules });
  const ingest = new IngestCore({
    store: ingestStoreFor(database),
    clock,
    config,
    log: log.child({ module: 'ingest' }),
  });
  const pki = new BridgePki({ config: config.pki, clock, log: log.child({ module: 'pki' }) });
  const bridgesRepository = new BridgesRepository();
  const mqtt = new MqttBridge({
    db,
    clock,
    log: log.child({ module: 'mqtt' }),
    pki,
    bridges: bridgesRepository,
    devices: new BridgeDevices({
      db,
      clock,
      devices: devicesRepository,
      audit,
      log: log.child({ module: 'mqtt' }),
    }),
    ingest,
  });
  const bridges = new BridgesService({
    db,
    clock,
    pki,
    bridges: bridgesRepository,
    sites,
    audit,
    connections: mqtt,
    mqttUrl: () =>
      config.mqttUrl ?? `mqtts://${new URL(config.baseUrl).hostname}:${mqtt.port || config.mqttPort || 8883}`,
  });
  const deviceMoves = new DeviceMoves({
    db,
    clock,
    log: log.child({ module: 'devices' }),
    jobs,
    devices: devicesRepository,
    sites,
    moves: new DeviceMovesRepository(),
    audit,
  });
  deviceMoves.register();
  const measurementsRepository = new MeasurementsRepository();
  const measurements = new MeasurementsService({
    db,
    clock,
    config,
    measurements: measurementsRepository,
    catchUp: () => ingest.catchUp(),
  });
  const retention = new RetentionJob({
    db,
    clock,
    config,
    log: log.child({ module: 'retention' }),
    measurements: measurementsRepository,
    catchUp: () => ingest.catchUp(),
  });
  const accountExport = new AccountExport({
    db,
    clock,
    config,
    exports: new ExportRepository(),
    measurementsRepository,
    measurements,
    deviceMoves,
  });
  const { reports } = buildReports({ db, clock, log, jobs, sites, audit, webhooks, deviceMoves, rules });
  const reportSchedules = buildReportSchedules({
    database,
    db,
    clock,
    log,
    jobs,
    mailer,
    audit,
    sites,
    reports,
  });
  // After commit, ingest hands over what it wrote: the engine evaluates soon (the marker it reads
  // was written in the same transaction), and device flips become device.online/offline webhooks.
  ingest.onAccepted(() => rules.kick());
  // Flips are queued as a job in the ingest transaction itself; after commit, run it now.
  jobs.register(DEVICE_STATE_JOB, {
    run: (payload) => webhooks.publishDeviceStates(payload as DeviceStateChange[]),
  });
  ingest.onDeviceState(() => webhooks.kick());
  return {
    ingest,
    rules,
    events,
    silences,
    webhooksRepository,
    webhooks,
    pki,
    bridgesRepository,
    bridges,
    mqtt,
    deviceMoves,
    measurementsRepository,
    measurements,
    retention,
    accountExport,
    reports,
    reportSchedules,
    config,
    clock,
    log,
    database,
    db,
    mailer,
    jobs,
    rateLimiter,
    idempotency,
    audit,
    accounts,
    authRepository,
    authService,
    authenticator,
    tokensRepository,
    tokens,
    sites,
    devicesRepository,
    devices,
    sensorsRepository,
    sensors,
  };
}
