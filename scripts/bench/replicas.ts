import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import mqtt, { type MqttClient } from 'mqtt';
import { measurements } from './ingest.ts';
import { runIngestLoad } from './load.ts';
import {
  apiClient,
  cpuMicros,
  cpuWithReapedMicros,
  freePort,
  machineMeter,
  median,
  roundKnobs,
  serverProcess,
  setUpAccount,
  spawnLogged,
  startServer,
  tempDir,
  throwawayPostgres,
  type ServerProcess,
} from './lib.ts';
import { averageBackends, mergeWaits, sampleWaits, type PgWaits } from './pg-waits.ts';

/**
 * Replicas behind a balancer: HTTP ingest (32 measurements per request, 50 devices) and MQTT bridge
 * throughput (QoS 1, 32 measurements per message, 50 mutual-TLS clients) through Debian's HAProxy,
 * to one cloud replica and to two (processes of their own), on one PostgreSQL database of the
 * bench's own and one Redis under a key prefix of its own (REDIS_URL: the clustered bridge), both
 * removed afterwards. HAProxy runs one process with a frontend per layout (HTTP mode for the API,
 * TCP with TLS passthrough for MQTT; the backends as in docs/operations.md), so the two layouts take
 * turns in the same rounds; each layout has its own account, devices and bridge. Each round records
 * the CPU of the load generator (wrk for HTTP, this process for MQTT), of the replicas, of HAProxy
 * and of every postgres process on the machine, and the row names what limited it.
 */
const { durationS: DURATION_S, rounds: ROUNDS, warmUpS: WARM_UP_S } = roundKnobs(3);
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const DEVICES = 50;
const CONNECTIONS = 50;
const CLIENTS = 50;
const WINDOW = 10;
const PER_REQUEST = 32;
/** % of one core at which one single-threaded process is the bottleneck. */
const CORE_BOUND = 90;
/** BENCH_PG_WAITS=1: samples what PostgreSQL's backends wait on in every round (pg-waits.ts). */
const PG_WAITS = process.env.BENCH_PG_WAITS === '1';
/** BENCH_INGEST_WRITERS: the replicas' INGEST_WRITERS (unset: the cloud's default). */
const INGEST_WRITERS = process.env.BENCH_INGEST_WRITERS;

interface Layout {
  name: string;
  replicas: number;
  httpUrl: string;
  mqttPort: number;
  devices: { localId: string; token: string }[];
  bundle: { cert: string; key: string; ca: string };
  topics: string[];
}

interface Round {
  perSec: number;
  generatorCpu: number;
  replicasCpu: number;
  haproxyCpu: number;
  postgresCpu: number;
  machineBusy: number;
  steal: number;
  failed: number;
  /** With BENCH_PG_WAITS=1. */
  waits?: PgWaits;
}

export interface ReplicasRow {
  load: string;
  layout: string;
  medianPerSec: number;
  minPerSec: number;
  maxPerSec: number;
  ratio: number | null;
  limit: string;
  rounds: Round[];
}

/**
 * CPU time of every process on the machine named postgres (the server and its backends), µs, by pid;
 * with the server's ended and reaped backends (`cpuWithReapedMicros`).
 */
function postgresMicros(): Map<number, number> {
  const byPid = new Map<number, number>();
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres')
        byPid.set(Number(pid), cpuWithReapedMicros(Number(pid)));
    } catch {
      // The process ended while being read.
    }
  }
  return byPid;
}

/**
 * The postgres CPU used between two readings: per process, from its reading before (0 for one that
 * started since). A backend that ended meanwhile counts through its server's reaped time.
 */
function postgresDelta(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, micros] of after) total += Math.max(0, micros - (before.get(pid) ?? 0));
  return total;
}

/** Measures `run` (which answers its count, its duration in s and the generator's CPU in µs). */
async function measured(
  pids: { replicas: number[]; haproxy: number },
  run: () => Promise<{ count: number; seconds: number; generatorMicros: number; failed: number }>,
  waitsOf?: () => Promise<() => Promise<PgWaits>>,
): Promise<Round> {
  const cpu = () => ({
    replicas: pids.replicas.reduce((n, pid) => n + cpuMicros(pid), 0),
    haproxy: cpuMicros(pids.haproxy),
    postgres: postgresMicros(),
  });
  const machine = machineMeter();
  const sampling = await waitsOf?.();
  const before = cpu();
  const r = await run();
  const after = cpu();
  const { idlePercent, stealPercent } = machine();
  const waits = await sampling?.();
  const percent = (micros: number) => Math.round(micros / (r.seconds * 10_000));
  return {
    perSec: r.count / r.seconds,
    generatorCpu: percent(r.generatorMicros),
    replicasCpu: percent(after.replicas - before.replicas),
    haproxyCpu: percent(after.haproxy - before.haproxy),
    postgresCpu: percent(postgresDelta(before.postgres, after.postgres)),
    machineBusy: Math.round(100 - idlePercent),
    steal: Math.round(stealPercent),
    failed: r.failed,
    ...(waits ? { waits } : {}),
  };
}

async function httpRound(layout: Layout, seconds: number) {
  const r = await runIngestLoad({
    url: layout.httpUrl,
    wire: 'cloud',
    devices: layout.devices,
    measurements: measurements(PER_REQUEST),
    connections: CONNECTIONS,
    durationS: seconds,
  });
  return {
    count: r.requestsPerSec * r.durationS,
    seconds: r.durationS,
    generatorMicros: r.generatorCpuMicros,
    failed: r.non2xx + r.errors,
  };
}

/** CLIENTS clients through the balancer, each keeping WINDOW QoS 1 publishes in flight; PUBACKs counted. */
async function mqttRound(layout: Layout, seconds: number) {
  const payload = JSON.stringify({ measurements: measurements(PER_REQUEST) });
  const clients: MqttClient[] = [];
  for (let i = 0; i < CLIENTS; i++) {
    clients.push(
      await mqtt.connectAsync(`mqtts://127.0.0.1:${layout.mqttPort}`, {
        protocolVersion: 5,
        reconnectPeriod: 0,
        clientId: `bench-${i}-${process.pid}`,
        ...layout.bundle,
      }),
    );
  }
  let acked = 0;
  let failed = 0;
  const stopAt = Date.now() + seconds * 1000;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  // Bounded: a publish still unanswered 30 s after the end counts as failed when its client is closed.
  const finished = Promise.all(
    clients.map(
      (client, c) =>
        new Promise<void>((resolve) => {
          let outstanding = 0;
          let n = 0;
          const next = () => {
            if (Date.now() >= stopAt) {
              if (outstanding === 0) resolve();
              return;
            }
            outstanding++;
            const topic = layout.topics[(c + n++) % layout.topics.length]!;
            client.publish(topic, payload, { qos: 1 }, (err) => {
              outstanding--;
              if (err) failed++;
              else acked++;
              next();
            });
          };
          for (let i = 0; i < WINDOW; i++) next();
        }),
    ),
  );
  await Promise.race([finished, new Promise((r) => setTimeout(r, (seconds + 30) * 1000).unref())]);
  const elapsedS = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  await Promise.all(clients.map((client) => client.endAsync(true)));
  return { count: acked, seconds: elapsedS, generatorMicros: cpu.user + cpu.system, failed };
}

/** Waits until the replicas' background work after a round is done: their CPU stays still for 100 ms. */
async function quiet(pids: number[]): Promise<void> {
  const total = () => pids.reduce((n, pid) => n + cpuMicros(pid), 0);
  for (let i = 0; i < 50; i++) {
    const before = total();
    await new Promise((resolve) => setTimeout(resolve, 100));
    if (total() - before < 5_000 * pids.length) return;
  }
}

/**
 * The bench's HAProxy configuration: docs/operations.md's backends on loopback, a frontend pair
 * (HTTP, MQTT) per layout; replica A alone behind the first, A and B behind the second.
 */
function haproxyConfig(
  ports: { http1: number; mqtt1: number; http2: number; mqtt2: number },
  replicas: { http: number; mqtt: number }[],
): string {
  const servers = (n: number, kind: 'http' | 'mqtt') =>
    replicas
      .slice(0, n)
      .map((r, i) =>
        kind === 'http'
          ? `    server cloud${i + 1} 127.0.0.1:${r.http} check inter 1s fall 2 rise 2`
          : `    server cloud${i + 1} 127.0.0.1:${r.mqtt} check port ${r.http} inter 1s fall 2 rise 2`,
      )
      .join('\n');
  const layout = (n: number, http: number, mqttPort: number) => `
frontend http${n}
    mode http
    bind 127.0.0.1:${http}
    default_backend cloud_http${n}

backend cloud_http${n}
    mode http
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    retry-on conn-failure empty-response response-timeout
${servers(n, 'http')}

frontend mqtts${n}
    mode tcp
    bind 127.0.0.1:${mqttPort}
    default_backend cloud_mqtt${n}

backend cloud_mqtt${n}
    mode tcp
    balance leastconn
    option httpchk GET /readyz
${servers(n, 'mqtt')}
`;
  return `global
    maxconn 4096

defaults
    timeout connect 5s
    # Longer than the guide's (the check interval): on a saturated machine a replica's /readyz can
    # take over a second, and a replica taken out of rotation mid-round is not what is measured.
    timeout check   5s
    timeout client  65s
    timeout server  65s
    retries 2
    option redispatch
${layout(1, ports.http1, ports.mqtt1)}${layout(2, ports.http2, ports.mqtt2)}`;
}

async function waitReady(url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    const ok = await fetch(`${url}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url}/readyz: not ready`);
}

function limitOf(rounds: Round[]): string {
  const m = (pick: (r: Round) => number) => Math.round(median(rounds.map(pick)));
  const generator = m((r) => r.generatorCpu);
  if (generator >= CORE_BOUND) return `load generator (${generator} % of a core)`;
  if (m((r) => r.postgresCpu) >= CORE_BOUND) return `PostgreSQL (${m((r) => r.postgresCpu)} % of a core)`;
  if (m((r) => r.machineBusy) >= 95) return `machine CPU (${m((r) => r.machineBusy)} % busy)`;
  return 'replicas (no other process at its limit)';
}

export async function benchReplicas(postgresUrl: string): Promise<ReplicasRow[]> {
  const work = tempDir('bench-replicas-');
  const prefix = `smbench:${randomBytes(6).toString('hex')}:`;
  const db = await throwawayPostgres(postgresUrl);
  const servers: ServerProcess[] = [];
  try {
    const replicas: { server: ServerProcess; dataDir: string; mqtt: number }[] = [];
    const startReplica = async (name: string) => {
      const dataDir = path.join(work, name);
      fs.mkdirSync(dataDir);
      const mqttPort = await freePort();
      const server = await startServer('cloud/src/main.ts', {
        DATA_DIR: dataDir,
        DATABASE_URL: db.url,
        MQTT_PORT: String(mqttPort),
        MQTT_HOST: '127.0.0.1',
        REDIS_URL,
        REDIS_PREFIX: prefix,
        RATE_LIMIT_INGEST_PER_MIN: '100000000',
        RATE_LIMIT_MGMT_PER_MIN: '100000',
        ...(INGEST_WRITERS ? { INGEST_WRITERS } : {}),
      });
      servers.push(server);
      replicas.push({ server, dataDir, mqtt: mqttPort });
    };
    // A alone first: it migrates, and its outbox receives the sign-in mails (no other replica claims them).
    await startReplica('a');
    const a = replicas[0]!;
    const accounts: { account: Awaited<ReturnType<typeof setUpAccount>>; bridge: Record<string, string> }[] =
      [];
    for (const n of [1, 2]) {
      const account = await setUpAccount(a.server.url, a.dataDir, DEVICES, {
        email: `replicas-${n}@example.com`,
      });
      const bridge = await apiClient(a.server.url, account.token)('POST', '/v1/bridges', {
        site_id: account.siteId,
        name: `bench ${n}`,
      });
      accounts.push({ account, bridge });
      // setUpAccount reads any sign-in code in the outbox: the next account's must be the only one.
      fs.rmSync(path.join(a.dataDir, 'outbox'), { recursive: true, force: true });
    }
    await startReplica('b');

    const ports = { http1: 0, mqtt1: 0, http2: 0, mqtt2: 0 };
    for (const key of Object.keys(ports) as (keyof typeof ports)[]) ports[key] = await freePort();
    const config = path.join(work, 'haproxy.cfg');
    fs.writeFileSync(
      config,
      haproxyConfig(
        ports,
        replicas.map((r) => ({ http: Number(new URL(r.server.url).port), mqtt: r.mqtt })),
      ),
    );
    const { child, logFile } = spawnLogged(
      'haproxy',
      ['-db', '-f', config],
      { PATH: '/usr/sbin:/usr/bin' },
      'haproxy',
    );
    const haproxy = serverProcess(child, '', logFile);
    servers.push(haproxy);
    await waitReady(`http://127.0.0.1:${ports.http1}`);
    await waitReady(`http://127.0.0.1:${ports.http2}`);
    // Both replicas seen up by the balancer's checks (rise 2, 1 s apart) before any round.
    await new Promise((r) => setTimeout(r, 3000));

    const layouts: Layout[] = [1, 2].map((n) => {
      const { account, bridge } = accounts[n - 1]!;
      return {
        name: n === 1 ? '1 replica' : '2 replicas',
        replicas: n,
        httpUrl: `http://127.0.0.1:${n === 1 ? ports.http1 : ports.http2}`,
        mqttPort: n === 1 ? ports.mqtt1 : ports.mqtt2,
        devices: account.devices,
        bundle: { cert: bridge.cert_pem!, key: bridge.key_pem!, ca: bridge.ca_pem! },
        topics: account.devices.map((d) => `${bridge.topic_root}${d.localId}`),
      };
    });
    const pids = (layout: Layout) => ({
      replicas: replicas.slice(0, layout.replicas).map((r) => r.server.pid),
      haproxy: haproxy.pid,
    });
    const allPids = replicas.map((r) => r.server.pid);

    const rows: ReplicasRow[] = [];
    const loads = [
      { name: `HTTP ingest, ${PER_REQUEST} measurements/request (requests/s)`, round: httpRound },
      { name: `MQTT bridge, QoS 1, ${PER_REQUEST} measurements/message (messages/s)`, round: mqttRound },
    ];
    for (const load of loads) {
      for (const layout of layouts) {
        await load.round(layout, WARM_UP_S);
        await quiet(allPids);
      }
      const rounds = new Map<Layout, Round[]>(layouts.map((l) => [l, []]));
      for (let r = 0; r < ROUNDS; r++) {
        for (let k = 0; k < layouts.length; k++) {
          const layout = layouts[(r + k) % layouts.length]!;
          rounds
            .get(layout)!
            .push(
              await measured(
                pids(layout),
                () => load.round(layout, DURATION_S),
                PG_WAITS ? () => sampleWaits(postgresUrl, new URL(db.url).pathname.slice(1)) : undefined,
              ),
            );
          await quiet(allPids);
        }
      }
      const one = median(rounds.get(layouts[0]!)!.map((m) => m.perSec));
      for (const layout of layouts) {
        const done = rounds.get(layout)!;
        const each = done.map((m) => m.perSec);
        rows.push({
          load: load.name,
          layout: layout.name,
          medianPerSec: Math.round(median(each)),
          minPerSec: Math.round(Math.min(...each)),
          maxPerSec: Math.round(Math.max(...each)),
          ratio: layout.replicas === 1 ? null : Math.round((median(each) / one) * 100) / 100,
          limit: limitOf(done),
          rounds: done,
        });
      }
    }
    return rows;
  } finally {
    for (const server of servers.reverse()) await server.stop();
    await db.drop();
    const redis = new Redis(REDIS_URL);
    try {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
    } finally {
      redis.disconnect();
    }
    fs.rmSync(work, { recursive: true, force: true });
  }
}

export function replicasTable(rows: ReplicasRow[]): [string[], (string | number)[][]] {
  const medianOf = (rounds: Round[], pick: (r: Round) => number) => Math.round(median(rounds.map(pick)));
  return [
    [
      'load',
      'layout',
      'per s (median)',
      'rounds min–max',
      'ratio 2/1',
      'generator CPU %',
      'replicas CPU %',
      'HAProxy CPU %',
      'postgres CPU %',
      'machine busy %',
      'steal %',
      'limited by',
      'failed',
    ],
    rows.map((r) => [
      r.load,
      r.layout,
      r.medianPerSec,
      `${r.minPerSec}–${r.maxPerSec}`,
      r.ratio ?? '',
      medianOf(r.rounds, (m) => m.generatorCpu),
      medianOf(r.rounds, (m) => m.replicasCpu),
      medianOf(r.rounds, (m) => m.haproxyCpu),
      medianOf(r.rounds, (m) => m.postgresCpu),
      medianOf(r.rounds, (m) => m.machineBusy),
      medianOf(r.rounds, (m) => m.steal),
      r.limit,
      r.rounds.reduce((n, m) => n + m.failed, 0),
    ]),
  ];
}

/**
 * With BENCH_PG_WAITS=1, per row: the database's transactions per unit of load (request or
 * message, every replica's background work included) and what its backends did, as average
 * backends per state over the rounds, the largest first; then the statements that waited most.
 */
export function replicasWaits(rows: ReplicasRow[]): string[] {
  const lines: string[] = [];
  for (const row of rows) {
    if (!row.rounds.every((r) => r.waits)) continue;
    const w = mergeWaits(row.rounds.map((r) => r.waits!));
    const units = row.rounds.reduce((n, r) => n + r.perSec, 0) * DURATION_S;
    const states = averageBackends(w.states, w.samples)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ');
    lines.push(
      `${row.load}, ${row.layout}: ${(w.commits / Math.max(1, units)).toFixed(2)} commits per unit; ` +
        `backends: ${states || 'none'} (${w.samples} samples)`,
    );
    for (const [k, n] of averageBackends(w.statements, w.samples, 5)) lines.push(`    ${n}  ${k}`);
    const times = Object.entries(w.statementTime).sort((a, b) => b[1].ms - a[1].ms);
    if (times.length > 0) {
      const total = times.reduce((n, [, t]) => n + t.ms, 0);
      lines.push(
        `  statements (pg_stat_statements): ${(total / Math.max(1, units)).toFixed(3)} ms per unit; the largest:`,
      );
      for (const [k, t] of times.slice(0, 8))
        lines.push(
          `    ${((t.ms / Math.max(1, units)) * 1000).toFixed(0)} µs/unit, ${(t.calls / Math.max(1, units)).toFixed(3)} calls/unit  ${k}`,
        );
    }
  }
  return lines;
}
