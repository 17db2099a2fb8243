import path from 'node:path';
import { z } from 'zod';
import proxyaddr from 'proxy-addr';
import type { PkiConfig } from './pki/pki.ts';

/**
 * The cloud's configuration, read once from the environment at start (docs/architecture.md, "How it
 * starts"), validated, frozen and injected. Nothing else reads `process.env`.
 */

const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
// Plain decimal digits only: `0x50` or `1e3` are typos, not ports.
const digits = z.string().regex(/^\d+$/, 'must be a whole number');
const port = digits.transform(Number).pipe(z.number().int().min(0).max(65535));
const positiveInt = digits.transform(Number).pipe(z.number().int().positive());
const wholeNumber = digits.transform(Number).pipe(z.number().int().min(0));
const url = z.url({ protocol: /^https?$/ });
/** Where the service is reached: links are made by appending paths, so no query or fragment. */
const baseUrl = url.refine((u) => !u.includes('?') && !u.includes('#'), 'must have no ?query or #fragment');
/** A span in whole days, at most ten years (the microseconds it makes stay exact numbers). */
const days = digits.transform(Number).pipe(z.number().int().min(1).max(3650));

const EnvSchema = z.object({
  PORT: port.default(8080),
  HOST: z.string().min(1).default('0.0.0.0'),
  MQTT_PORT: port.default(8883),
  MQTT_HOST: z.string().min(1).optional(),
  MQTT_URL: z
    .url({ protocol: /^mqtts$/, error: 'must be mqtts://host[:port]' })
    .refine((u) => /^mqtts:\/\/[^/:?#]+/.test(u), 'must be mqtts://host[:port], with a host')
    .optional(),
  MQTT_TLS_HOSTS: z
    .string()
    .regex(/^[a-z0-9.:-]+(,[a-z0-9.:-]+)*$/i, 'must be host names or IP addresses separated by commas')
    .optional(),
  PKI_CA_CERT_FILE: z.string().min(1).optional(),
  PKI_CA_KEY_FILE: z.string().min(1).optional(),
  MQTT_TLS_CERT_FILE: z.string().min(1).optional(),
  MQTT_TLS_KEY_FILE: z.string().min(1).optional(),
  REDIS_URL: z
    .url({ protocol: /^rediss?$/, error: 'must be redis://host[:port][/db] or rediss://...' })
    .optional(),
  REDIS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_:.-]{1,64}$/, 'must be 1 to 64 letters, digits, _ : . or -')
    .default('sm:'),
  DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: z
    .string()
    .regex(/^(postgres(ql)?:\/\/|sqlite:.)/, 'must be postgres://... or sqlite:<file>')
    .optional(),
  BASE_URL: baseUrl.optional(),
  PUBLIC_BASE_URL: baseUrl.optional(),
  DASHBOARD_DOMAIN: z
    .string()
    .regex(/^[a-z0-9.-]+$/i, 'must be a bare domain name such as app.example.com')
    .optional(),
  SMTP_URL: z
    .string()
    .regex(/^smtps?:\/\//, 'must be smtp://... or smtps://...')
    .optional(),
  MAIL_FROM: z.string().min(3).default('Sensor Monitoring <no-reply@localhost>'),
  SIGNUP: z.enum(['open', 'closed']).default('open'),
  SESSION_MAX_DAYS: days.default(30),
  // At most a hundred years: the cutoff in microseconds stays an exact number, and a PostgreSQL bigint.
  RETENTION_DAYS: positiveInt.pipe(z.number().max(36_500)).default(730),
  JOB_RETENTION_DAYS: days.default(7),
  JOB_CLAIM_SECONDS: positiveInt.pipe(z.number().max(86_400)).default(300),
  RATE_LIMIT_MODE: z.enum(['enforce', 'warn']).default('enforce'),
  RATE_LIMIT_MGMT_PER_MIN: positiveInt.default(600),
  RATE_LIMIT_INGEST_PER_MIN: positiveInt.default(60),
  RATE_LIMIT_READ_PER_MIN: positiveInt.default(120),
  RATE_LIMIT_REPORT_PER_MIN: positiveInt.default(4),
  RATE_LIMIT_PUBLIC_PER_MIN: positiveInt.default(600),
  RATE_LIMIT_SYNC_MS: wholeNumber.pipe(z.number().max(60_000)).optional(),
  WEBHOOK_ALLOW_PRIVATE: bool.default(false),
  TRUST_PROXY: z
    .string()
    .transform((v, ctx) => {
      if (/^\d+$/.test(v)) return Number(v);
      const list = v.split(',').map((a) => a.trim());
      try {
        proxyaddr.compile(list);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
      return list;
    })
    .optional(),
  METRICS_ALLOW: z
    .string()
    .transform((v, ctx) => {
      const list = v.split(',').map((a) => a.trim());
      try {
        proxyaddr.compile(list);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
      return list;
    })
    .optional(),
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  INGEST_MAX_PENDING: positiveInt.default(10_000),
  HTTP_MAX_CONNECTIONS: positiveInt.default(10_000),
  HTTP_MAX_PIPELINED: positiveInt.default(4096),
  LIVE_MAX_STREAMS: positiveInt.default(1000),
  INGEST_MAX_WAIT_MS: positiveInt.default(2000),
  INGEST_WRITERS: positiveInt.pipe(z.number().max(8)).default(4),
  SHUTDOWN_DRAIN_MS: wholeNumber.pipe(z.number().max(600_000)).default(5000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type Env = z.input<typeof EnvSchema>;

/** Every variable the cloud reads (the README's "Configure" table lists each one). */
export const ENV_VARIABLES: readonly string[] = Object.keys(EnvSchema.shape);

/** Where the clustered MQTT bridge keeps its shared state (cloud/src/mqtt/cluster.ts). */
export interface RedisSettings {
  /** `redis://[:password@]host[:port][/db]` or `rediss://...` */
  readonly url: string;
  /** Prefix of every key the bridge writes, so installations (or tests) can share one Redis. */
  readonly prefix: string;
}

export interface RateLimits {
  readonly mgmtPerMin: number;
  readonly ingestPerMin: number;
  readonly readPerMin: number;
  readonly reportPerMin: number;
  /** Requests per minute per client address on the public API (`/api/public`). */
  readonly publicPerMin: number;
}

export interface Config {
  readonly port: number;
  readonly host: string;
  /** 0 disables the MQTT bridge. */
  readonly mqttPort: number;
  readonly mqttHost: string;
  /** MQTT_URL: what bridges are told to connect to; null = mqtts://<BASE_URL host>:<MQTT port>. */
  readonly mqttUrl: string | null;
  /** The service CA and the MQTT server certificate (configured files, or kept in the database). */
  readonly pki: PkiConfig;
  /**
   * REDIS_URL and REDIS_PREFIX: the clustered MQTT bridge (sessions, retained messages and publishes
   * shared by every replica through Redis); null: the bridge is this process's alone.
   */
  readonly redis: RedisSettings | null;
  readonly dataDir: string;
  /** `postgres://...` or `sqlite:<absolute file>` */
  readonly databaseUrl: string;
  /** The address clients reach the API at. Without BASE_URL: http://localhost:<the port listened on>. */
  readonly baseUrl: string;
  readonly publicBaseUrl: string;
  /** Whether BASE_URL / PUBLIC_BASE_URL were set, or are derived from the port (see `withListeningPort`). */
  readonly baseUrlDerived: boolean;
  readonly dashboardDomain: string | null;
  readonly smtpUrl: string | null;
  readonly mailFrom: string;
  readonly signup: 'open' | 'closed';
  /** A session ends this many days after sign-in, however often it is used. */
  readonly sessionMaxDays: number;
  readonly retentionDays: number;
  /** Finished jobs (sent mail, delivered webhooks) are removed this many days after they finished. */
  readonly jobRetentionDays: number;
  /**
   * JOB_CLAIM_SECONDS: how long a replica's claim on a job holds without being renewed (a running
   * job renews it every third of that); a job of a replica that died is taken over once it lapses.
   * A report's claim is shorter (30 s) where this is longer.
   */
  readonly jobClaimSeconds: number;
  readonly rateLimitMode: 'enforce' | 'warn';
  readonly rateLimits: RateLimits;
  /**
   * RATE_LIMIT_SYNC_MS: how long a process may keep counted hits before writing them to the shared
   * counters; 0 writes every hit at once. Unset: the limiter's default (`DEFAULT_SYNC_MS`).
   */
  readonly rateLimitSyncMs: number | undefined;
  /**
   * Ingest's admission control (docs/design/ingest.md, "Admission control"): a request is refused
   * with 503 `overloaded` (PUBACK 0x97) while this process holds INGEST_MAX_PENDING ingest requests
   * not yet answered, or while the oldest one waiting for its group has waited INGEST_MAX_WAIT_MS.
   */
  readonly ingestAdmission: IngestAdmission;
  /**
   * INGEST_WRITERS: ingest groups a process writes at once on PostgreSQL (SQLite has one writer).
   * Fewer make each group larger, so fewer commits per request: with several replicas on one
   * database, the replicas' writers add up (docs/operations.md, "Sizing").
   */
  readonly ingestWriters: number;
  /**
   * What one process holds for its HTTP clients (cloud/src/http/connections.ts): HTTP_MAX_CONNECTIONS
   * open connections (past it, the keep-alive one idle longest is closed, or where none has been idle
   * a second the new one is answered 503 `overloaded` and closed) and HTTP_MAX_PIPELINED requests
   * read behind their connection's first unanswered one, on all connections together (past it,
   * pipelining connections are no longer read, and are read again as room under it comes; a read
   * bringing one more past twice it closes its connection).
   */
  readonly httpLimits: { readonly maxConnections: number; readonly maxPipelined: number };
  /**
   * LIVE_MAX_STREAMS: the dashboard's event streams one process holds, of all accounts together
   * (past it 503 `overloaded`; the dashboard tries again). Each may hold up to 1 MiB its client has
   * not read, so this bounds that memory; the per-account bound alone would not, accounts being
   * free to make.
   */
  readonly liveMaxStreams: number;
  readonly webhookAllowPrivate: boolean;
  /**
   * TRUST_PROXY: which proxies in front of the cloud may name the client (`X-Forwarded-For`): a hop
   * count, or addresses, subnets and proxy-addr's names (`loopback`, `linklocal`, `uniquelocal`);
   * null trusts none, so the client is the socket's peer.
   */
  readonly trustProxy: number | readonly string[] | null;
  readonly logLevel: string;
  /**
   * SHUTDOWN_DRAIN_MS: on SIGTERM the process answers `/readyz` with 503 and keeps serving for this
   * long, so the load balancer takes it out before the listener closes.
   */
  readonly shutdownDrainMs: number;
  /** METRICS_ALLOW: addresses and networks `GET /metrics` answers (proxy-addr's syntax); loopback by default. */
  readonly metricsAllow: readonly string[];
  /** METRICS_TOKEN: a bearer token that opens `GET /metrics` from anywhere; null: none. */
  readonly metricsToken: string | null;
}

export interface IngestAdmission {
  readonly maxPending: number;
  readonly maxWaitMs: number;
}

export class ConfigError extends Error {}

/** Variables whose whole value is a secret: never repeated in an error. */
const SECRET_VARIABLES = new Set(['METRICS_TOKEN']);

/**
 * A value as a config error may repeat it (stderr, the journal): a URL's password masked, a secret
 * variable's value not shown at all.
 */
function shown(name: string, value: string): string {
  if (SECRET_VARIABLES.has(name)) return '(not shown)';
  return value.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/@:]*):[^/@]*@/i, '$1:***@');
}

/** Parses the environment; a bad value throws a ConfigError whose message is one line naming the variable. */
export function loadConfig(env: Record<string, string | undefined>): Config {
  // Empty strings mean "unset", as in a shell `FOO= npm start`.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = EnvSchema.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0] ?? 'environment');
    throw new ConfigError(
      `invalid ${name}=${JSON.stringify(shown(name, present[name] ?? ''))}: ${issue.message}`,
    );
  }
  const e = parsed.data;
  const dataDir = path.resolve(e.DATA_DIR);
  const baseUrl = (e.BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, '');
  for (const [a, b] of [
    ['PKI_CA_CERT_FILE', 'PKI_CA_KEY_FILE'],
    ['MQTT_TLS_CERT_FILE', 'MQTT_TLS_KEY_FILE'],
  ] as const) {
    if ((e[a] === undefined) !== (e[b] === undefined)) {
      const [set, unset] = e[a] === undefined ? [b, a] : [a, b];
      throw new ConfigError(`invalid ${set}=${JSON.stringify(e[set])}: set ${unset} too (they are a pair)`);
    }
  }
  const hostOf = (u: string) => new URL(u).hostname.replace(/^\[(.*)\]$/, '$1');
  const tlsHosts = e.MQTT_TLS_HOSTS
    ? e.MQTT_TLS_HOSTS.split(',')
    : [...(e.MQTT_URL ? [hostOf(e.MQTT_URL)] : []), hostOf(baseUrl), 'localhost', '127.0.0.1', '::1'];
  return Object.freeze({
    port: e.PORT,
    host: e.HOST,
    mqttPort: e.MQTT_PORT,
    mqttHost: e.MQTT_HOST ?? e.HOST,
    mqttUrl: e.MQTT_URL?.replace(/\/+$/, '') ?? null,
    pki: Object.freeze({
      dir: path.join(dataDir, 'pki'),
      caCertFile: e.PKI_CA_CERT_FILE ? path.resolve(e.PKI_CA_CERT_FILE) : null,
      caKeyFile: e.PKI_CA_KEY_FILE ? path.resolve(e.PKI_CA_KEY_FILE) : null,
      serverCertFile: e.MQTT_TLS_CERT_FILE ? path.resolve(e.MQTT_TLS_CERT_FILE) : null,
      serverKeyFile: e.MQTT_TLS_KEY_FILE ? path.resolve(e.MQTT_TLS_KEY_FILE) : null,
      serverHosts: [...new Set(tlsHosts)],
    }),
    redis: e.REDIS_URL ? Object.freeze({ url: e.REDIS_URL, prefix: e.REDIS_PREFIX }) : null,
    dataDir,
    databaseUrl: e.DATABASE_URL ?? `sqlite:${path.join(dataDir, 'cloud.db')}`,
    baseUrl,
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? baseUrl).replace(/\/+$/, ''),
    baseUrlDerived: e.BASE_URL === undefined,
    dashboardDomain: e.DASHBOARD_DOMAIN ?? null,
    smtpUrl: e.SMTP_URL ?? null,
    mailFrom: e.MAIL_FROM,
    signup: e.SIGNUP,
    sessionMaxDays: e.SESSION_MAX_DAYS,
    retentionDays: e.RETENTION_DAYS,
    jobRetentionDays: e.JOB_RETENTION_DAYS,
    jobClaimSeconds: e.JOB_CLAIM_SECONDS,
    rateLimitMode: e.RATE_LIMIT_MODE,
    rateLimits: Object.freeze({
      mgmtPerMin: e.RATE_LIMIT_MGMT_PER_MIN,
      ingestPerMin: e.RATE_LIMIT_INGEST_PER_MIN,
      readPerMin: e.RATE_LIMIT_READ_PER_MIN,
      reportPerMin: e.RATE_LIMIT_REPORT_PER_MIN,
      publicPerMin: e.RATE_LIMIT_PUBLIC_PER_MIN,
    }),
    rateLimitSyncMs: e.RATE_LIMIT_SYNC_MS,
    ingestAdmission: Object.freeze({ maxPending: e.INGEST_MAX_PENDING, maxWaitMs: e.INGEST_MAX_WAIT_MS }),
    ingestWriters: e.INGEST_WRITERS,
    httpLimits: Object.freeze({ maxConnections: e.HTTP_MAX_CONNECTIONS, maxPipelined: e.HTTP_MAX_PIPELINED }),
    liveMaxStreams: e.LIVE_MAX_STREAMS,
    webhookAllowPrivate: e.WEBHOOK_ALLOW_PRIVATE,
    trustProxy: e.TRUST_PROXY ?? null,
    logLevel: e.LOG_LEVEL,
    shutdownDrainMs: e.SHUTDOWN_DRAIN_MS,
    metricsAllow: e.METRICS_ALLOW ?? ['loopback'],
    metricsToken: e.METRICS_TOKEN ?? null,
  });
}

/**
 * With PORT=0 the port is known only once the server listens; the derived addresses (in e-mailed
 * links and device ingest URLs) then name the real port.
 */
export function withListeningPort(config: Config, port: number): Config {
  if (!config.baseUrlDerived || config.port === port) return config;
  const baseUrl = `http://localhost:${port}`;
  const publicBaseUrl = config.publicBaseUrl === config.baseUrl ? baseUrl : config.publicBaseUrl;
  return Object.freeze({ ...config, port, baseUrl, publicBaseUrl });
}
