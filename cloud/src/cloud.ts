import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from './app.ts';
import { SystemClock, type Clock } from './clock.ts';
import { withListeningPort, type Config } from './config.ts';
import { Connections } from './http/connections.ts';
import type { RouteDef } from './http/route-table.ts';
import { ingestFastPath } from './ingest/ingest.fast-path.ts';
import { createLogger, type Logger } from './logger.ts';
import { buildServices, type Services } from './services.ts';
import { createDataDir, warnIfReadableByOthers } from './storage/data-dir.ts';
import { openDatabase, sqliteFiles, type OpenOptions } from './storage/database.ts';
import { ensureMeasurementPartitions } from './storage/partitions.ts';

export interface CloudOptions {
  config: Config;
  clock?: Clock;
  log?: Logger;
  /** PostgreSQL schema (tests isolate themselves in one). */
  database?: OpenOptions;
  jobPollMs?: number;
  /**
   * Start the MQTT bridge on this port whatever MQTT_PORT says (0: any free port, as tests and
   * benchmarks use). Without it the bridge listens on MQTT_PORT, and MQTT_PORT=0 disables it.
   */
  mqttListenPort?: number;
}

const MAINTENANCE_INTERVAL_MS = 10 * 60 * 1000;
const DAY_MICROS = 24 * 3600 * 1_000_000;
/**
 * Connections the kernel may hold for the HTTP server before it accepts them (capped by the system's
 * `net.core.somaxconn`). Node's default, 511, overflows when a site's devices all reconnect at once
 * after an outage; the kernel then drops or, with SYN cookies, sometimes resets them.
 */
export const LISTEN_BACKLOG = 4096;

/**
 * The cloud process: database (migrated at start), services, HTTP server and background work.
 * `stop()` finishes in-flight requests and jobs, then closes everything; it is safe to call twice.
 */
export class Cloud {
  private server: http.Server | null = null;
  /** The HTTP server's connections and their unanswered requests. */
  readonly connections: Connections;
  private maintenance: NodeJS.Timeout | null = null;
  private stopping: Promise<void> | null = null;
  services!: Services;
  routes!: RouteDef[];
  /** The dashboard's `/app/api` routes (not in the OpenAPI document). */
  dashboardRoutes!: RouteDef[];

  constructor(private readonly options: CloudOptions) {
    this.connections = new Connections(options.config.httpLimits);
  }

  private effectiveConfig: Config | null = null;

  /** The configuration in force (with the listening port filled in once started). */
  get config(): Config {
    return this.effectiveConfig ?? this.options.config;
  }

  async start(): Promise<void> {
    const log = this.options.log ?? createLogger(this.options.config.logLevel);
    const clock = this.options.clock ?? new SystemClock();
    // Listen first: with PORT=0 the derived base URL needs the real port before services exist.
    // Requests that arrive meanwhile (clients retrying against a restarting process) wait in
    // `early` and are handled once the services are up; without a listener they would never be
    // answered.
    this.server = http.createServer({ keepAliveTimeout: 65_000 });
    const early: [http.IncomingMessage, http.ServerResponse][] = [];
    let handle = (req: http.IncomingMessage, res: http.ServerResponse) => void early.push([req, res]);
    this.connections.track(this.server, (req, res) => handle(req, res));
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(
        { port: this.options.config.port, host: this.options.config.host, backlog: LISTEN_BACKLOG },
        () => resolve(),
      );
    });
    const config = withListeningPort(this.options.config, (this.server.address() as AddressInfo).port);
    this.effectiveConfig = config;
    let database;
    try {
      createDataDir(config.dataDir);
      database = await openDatabase(config.databaseUrl, {
        ...this.options.database,
        onNotifyError: (err) =>
          log.warn({ err }, 'notify channel between replicas failed (it reconnects by itself)'),
      });
    } catch (err) {
      this.closeEarly(early);
      throw err;
    }
    warnIfReadableByOthers([config.dataDir, ...sqliteFiles(config.databaseUrl)], log);
    await ensureMeasurementPartitions(database, clock.nowMicros(), log);
    this.services = buildServices({ config, clock, log, database, jobPollMs: this.options.jobPollMs });
    try {
      await this.services.hub.start();
    } catch (err) {
      await database.close();
      this.closeEarly(early);
      throw err;
    }
    this.services.metrics.watchConnections(this.connections);
    const { app, routes, dashboardRoutes } = createApp(this.services);
    this.routes = routes;
    this.dashboardRoutes = dashboardRoutes;
    // Device ingest first, straight from Node's HTTP server; everything else through Express.
    const fastPath = ingestFastPath(this.services);
    handle = (req, res) => {
      // Once stopping, the client is told not to reuse the connection.
      if (this.stopping) res.setHeader('Connection', 'close');
      if (!fastPath(req, res)) app(req, res);
    };
    for (const [req, res] of early.splice(0)) handle(req, res);
    const mqttPort = this.options.mqttListenPort ?? (config.mqttPort === 0 ? null : config.mqttPort);
    if (mqttPort !== null) {
      try {
        await this.services.pki.start();
        await this.services.mqtt.start(mqttPort, config.mqttHost);
      } catch (err) {
        await this.stop();
        throw err;
      }
    }
    this.services.jobs.start();
    this.services.rules.start();
    this.services.reportSchedules.start();
    this.services.alertEngine.start();
    this.maintenance = setInterval(() => void this.runMaintenance(), MAINTENANCE_INTERVAL_MS);
    this.maintenance.unref();
    this.services.health.markStarted();
    log.info({ url: this.url, database: database.dialect }, 'cloud started');
  }

  /** A start that failed: the listener closes, and the requests it held are dropped unanswered. */
  private closeEarly(early: [http.IncomingMessage, http.ServerResponse][]): void {
    this.server?.close();
    for (const [req] of early.splice(0)) req.socket.destroy();
  }

  /**
   * Housekeeping that keeps the shared tables small (expired keys, rate-limit windows, jobs finished
   * more than JOB_RETENTION_DAYS ago, webhook deliveries finished more than 30 days ago) and removes
   * measurements past RETENTION_DAYS.
   */
  async runMaintenance(): Promise<void> {
    const { clock, config, jobs } = this.services;
    try {
      await this.services.rateLimiter.prune();
      await this.services.idempotency.prune();
      await ensureMeasurementPartitions(
        this.services.database,
        this.services.clock.nowMicros(),
        this.services.log,
      );
      await jobs.pruneFinished(clock.nowMicros() - config.jobRetentionDays * DAY_MICROS);
      await this.services.webhooks.pruneDeliveries();
    } catch (err) {
      this.services.log.error({ err }, 'maintenance failed');
    }
    // Retention apart: a failure there must not stop the housekeeping above, nor the reverse.
    try {
      await this.services.retention.run();
    } catch (err) {
      this.services.log.error({ err }, 'retention failed');
    }
  }

  /** The MQTT bridge's port, 0 when it is disabled. */
  get mqttPort(): number {
    return this.services?.mqtt.port ?? 0;
  }

  get port(): number {
    return (this.server?.address() as AddressInfo).port;
  }

  /** `http://127.0.0.1:<port>` of the listening server. */
  get url(): string {
    const address = this.server?.address() as AddressInfo;
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${address.port}`;
  }

  /**
   * A stop the load balancer sees coming: `/readyz` answers 503 at once, requests keep being served
   * for SHUTDOWN_DRAIN_MS (the balancer's checks notice meanwhile), then `stop()` closes the listener
   * and finishes what is in flight.
   */
  async drainAndStop(): Promise<void> {
    if (!this.stopping && this.services) {
      this.services.health.startDraining();
      this.services.log.info({ drain_ms: this.config.shutdownDrainMs }, 'draining before stop');
      await new Promise((resolve) => setTimeout(resolve, this.config.shutdownDrainMs));
    }
    return this.stop();
  }

  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  private async shutdown(): Promise<void> {
    if (this.maintenance) clearInterval(this.maintenance);
    this.services?.health.startDraining();
    // MQTT first: its publishes in progress still need the ingest core and the database.
    if (this.services) await this.services.mqtt.stop();
    const server = this.server;
    if (server) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // The dashboard's event streams stay open until ended: the server waits for them.
      this.services?.liveStreams.closeAll();
      // Node closes only the connections idle at `close()`: one whose request was in flight would stay
      // for the whole keep-alive timeout (65 s) once answered, and one a client opened without sending
      // a request yet, for the headers timeout. Each is closed as soon as it has nothing unanswered.
      this.connections.closeUnbusy();
      const sweep = setInterval(() => this.connections.closeUnbusy(), 50);
      await closed;
      clearInterval(sweep);
    }
    if (this.services) {
      // No more requests: the counted rate-limit hits go to the shared counters.
      await this.services.rateLimiter
        .stop()
        .catch((err: unknown) => this.services?.log.error({ err }, 'rate-limit counters not written'));
      await this.services.rules.stop();
      await this.services.reportSchedules.stop();
      await this.services.alertEngine.stop();
      // No more ingest: fold the journal's rest, so a clean stop leaves derived state complete.
      await this.services.ingest
        .stop()
        .catch((err: unknown) =>
          this.services?.log.error({ err }, 'the last ingest fold failed (the next start folds it)'),
        );
      await this.services.jobs.stop();
      this.services.dbOutage.stop();
      await this.services.hub.stop();
      this.services.mailer.close();
      await this.services.database.close();
    }
  }
}
