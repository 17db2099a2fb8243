import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { IngestObserver, IngestWay } from '../ingest/ingest.types.ts';

/** Counters some other part keeps as plain numbers since start; read at each scrape. */
export interface MetricSources {
  rules: { counts: { channelsEvaluated: number; alarmsOpened: number } };
  mqtt: { connectionCount: number; messagesReceived: number };
  liveStreams: { size: number };
  /** Per job kind: jobs waiting or running, and jobs given up on (kept JOB_RETENTION_DAYS). */
  jobs(): Promise<{ kind: string; queued: number; failed: number }[]>;
}

/** The HTTP server's figures (`Connections`, cloud/src/http/connections.ts). */
export interface HttpFigures {
  held: number;
  pipelined: number;
  count: number;
  pauses: number;
  cuts: number;
  refused: number;
  reclaimed: number;
}

/**
 * The process's Prometheus figures (`GET /metrics`), in a registry of its own (tests run several
 * clouds in one process). What runs per request or per measurement only increments counters; the
 * rest is read when Prometheus scrapes.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly httpRequests = new Counter({
    name: 'sm_http_requests_total',
    help: 'HTTP requests answered, by route template, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });
  private readonly httpDuration = new Histogram({
    name: 'sm_http_request_duration_seconds',
    help: 'Time from request to the end of the answer, by route template and method',
    labelNames: ['route', 'method'] as const,
    buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  private readonly ingestMeasurements = new Counter({
    name: 'sm_ingest_measurements_total',
    help: 'Measurements accepted (written or deduplicated) and rejected, by way in',
    labelNames: ['way', 'outcome'] as const,
    registers: [this.registry],
  });
  private readonly ingestGroupItems = new Histogram({
    name: 'sm_ingest_group_items',
    help: 'Requests and messages per ingest group (one transaction, one commit): how well the writes are grouped',
    buckets: [1, 5, 20, 50, 100, 250, 500],
    registers: [this.registry],
  });
  private readonly ingestGroupSeconds = new Histogram({
    name: 'sm_ingest_group_seconds',
    help: "Time from an ingest group's transaction begun to its commit",
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  private readonly ingestRejections = new Counter({
    name: 'sm_ingest_rejected_requests_total',
    help: 'Ingest requests refused, by way in and error code',
    labelNames: ['way', 'code'] as const,
    registers: [this.registry],
  });
  private readonly ruleEvaluations = new Counter({
    name: 'sm_rule_channel_evaluations_total',
    help: 'Channels evaluated by the rule engine (committed evaluations)',
    registers: [this.registry],
  });
  private readonly alarmsOpened = new Counter({
    name: 'sm_alarms_opened_total',
    help: 'Alarm events opened by the rule engine of this process',
    registers: [this.registry],
  });
  private readonly mqttConnections = new Gauge({
    name: 'sm_mqtt_connections',
    help: 'MQTT connections of authenticated bridges open on this process',
    registers: [this.registry],
  });
  private readonly mqttMessages = new Counter({
    name: 'sm_mqtt_messages_total',
    help: 'PUBLISH packets received from authenticated bridges',
    registers: [this.registry],
  });
  private readonly liveStreams = new Gauge({
    name: 'sm_live_streams',
    help: "The dashboard's live event streams open on this process",
    registers: [this.registry],
  });
  private readonly jobsQueued = new Gauge({
    name: 'sm_jobs_queued',
    help: 'Jobs waiting or running, by kind (the whole database: the same on every replica)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  private readonly jobsFailed = new Gauge({
    name: 'sm_jobs_failed',
    help: 'Jobs given up on after their last attempt and not yet pruned, by kind (the whole database)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  private readonly httpHeld = new Gauge({
    name: 'sm_http_requests_held',
    help: 'HTTP requests read and not yet answered, on every connection of this process',
    registers: [this.registry],
  });
  private readonly httpPipelined = new Gauge({
    name: 'sm_http_requests_pipelined',
    help: "HTTP requests read behind their connection's first unanswered one, on every connection (HTTP_MAX_PIPELINED bounds them)",
    registers: [this.registry],
  });
  private readonly httpConnections = new Gauge({
    name: 'sm_http_connections',
    help: 'HTTP connections open on this process (HTTP_MAX_CONNECTIONS bounds them)',
    registers: [this.registry],
  });
  private readonly httpPauses = new Counter({
    name: 'sm_http_pipelining_pauses_total',
    help: "Times this process stopped reading from a connection for its pipelined requests (its own or all connections' together)",
    registers: [this.registry],
  });
  private readonly httpCuts = new Counter({
    name: 'sm_http_connections_cut_total',
    help: 'Connections closed because a read brought a pipelined request while twice HTTP_MAX_PIPELINED were pipelined',
    registers: [this.registry],
  });
  private readonly httpRefused = new Counter({
    name: 'sm_http_connections_refused_total',
    help: 'Connections answered 503 overloaded and closed because HTTP_MAX_CONNECTIONS were open and none idle',
    registers: [this.registry],
  });
  private readonly httpReclaimed = new Counter({
    name: 'sm_http_connections_reclaimed_total',
    help: 'Idle keep-alive connections closed to make room for a new one at HTTP_MAX_CONNECTIONS',
    registers: [this.registry],
  });
  /** What the pulled totals were at the last scrape: counters move by the difference. */
  private readonly seen = {
    channelsEvaluated: 0,
    alarmsOpened: 0,
    mqttMessages: 0,
    httpPauses: 0,
    httpCuts: 0,
    httpRefused: 0,
    httpReclaimed: 0,
  };
  /** The HTTP server's connections, once the process has a server (tests build services without). */
  private connections: HttpFigures | null = null;

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** Reads the HTTP server's figures at each scrape. */
  watchConnections(connections: HttpFigures): void {
    this.connections = connections;
  }

  /** One answered HTTP request; `route` is the route's template (`/v1/sites/:site_id`), never the URL. */
  observeRequest(route: string, method: string, status: number, seconds: number): void {
    this.httpRequests.labels(route, method, String(status)).inc();
    this.httpDuration.labels(route, method).observe(seconds);
  }

  /** What ingest tells, once per item of a committed group. */
  readonly ingest: IngestObserver = {
    accepted: (way: IngestWay, measurements: number) => {
      this.ingestMeasurements.labels(way, 'accepted').inc(measurements);
    },
    rejected: (way: IngestWay, code: string, measurements: number) => {
      this.ingestRejections.labels(way, code).inc();
      if (measurements > 0) this.ingestMeasurements.labels(way, 'rejected').inc(measurements);
    },
    committed: (items: number, seconds: number) => {
      this.ingestGroupItems.observe(items);
      this.ingestGroupSeconds.observe(seconds);
    },
  };

  /** The exposition text, after reading the figures kept elsewhere. */
  async scrape(sources: MetricSources): Promise<string> {
    const { counts } = sources.rules;
    this.ruleEvaluations.inc(counts.channelsEvaluated - this.seen.channelsEvaluated);
    this.alarmsOpened.inc(counts.alarmsOpened - this.seen.alarmsOpened);
    this.mqttMessages.inc(sources.mqtt.messagesReceived - this.seen.mqttMessages);
    this.seen.channelsEvaluated = counts.channelsEvaluated;
    this.seen.alarmsOpened = counts.alarmsOpened;
    this.seen.mqttMessages = sources.mqtt.messagesReceived;
    this.mqttConnections.set(sources.mqtt.connectionCount);
    this.liveStreams.set(sources.liveStreams.size);
    if (this.connections) {
      const c = this.connections;
      this.httpHeld.set(c.held);
      this.httpPipelined.set(c.pipelined);
      this.httpConnections.set(c.count);
      this.httpPauses.inc(c.pauses - this.seen.httpPauses);
      this.httpCuts.inc(c.cuts - this.seen.httpCuts);
      this.httpRefused.inc(c.refused - this.seen.httpRefused);
      this.httpReclaimed.inc(c.reclaimed - this.seen.httpReclaimed);
      this.seen.httpPauses = c.pauses;
      this.seen.httpCuts = c.cuts;
      this.seen.httpRefused = c.refused;
      this.seen.httpReclaimed = c.reclaimed;
    }
    this.jobsQueued.reset();
    this.jobsFailed.reset();
    for (const row of await sources.jobs()) {
      this.jobsQueued.labels(row.kind).set(row.queued);
      this.jobsFailed.labels(row.kind).set(row.failed);
    }
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
