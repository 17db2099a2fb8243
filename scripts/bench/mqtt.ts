import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import { measurements } from './ingest.ts';
import {
  cpuMicros,
  freePort,
  machineMeter,
  median,
  memoryMiB,
  ROOT,
  setUpAccount,
  startServer,
  tempDir,
  throwawayPostgres,
  type ServerProcess,
  roundKnobs,
} from './lib.ts';

/**
 * MQTT bridge throughput: messages/s through the cloud's bridge (PUBACK after
 * the ingest group committed) with concurrent QoS 1 publishers over 50 devices, against the same
 * load on a bare aedes broker with no ingest and on Debian's Mosquitto, all over mutual TLS with the
 * same certificates and payloads, for 1 and 32 measurements per message.
 *
 * The targets run side by side and take turns, as in the ingest bench: after a warm-up each, ROUNDS
 * rounds in which every target is loaded once (the order rotates). A row shows the median round and
 * the spread (min–max) of the rounds. The load generator (mqtt.js) runs in this process, one thread:
 * each round records its CPU, the server's and the machine's, and the row names what limited it.
 */
const { durationS: DURATION_S, rounds: ROUNDS, warmUpS: WARM_UP_S } = roundKnobs(2);
const PUBLISHERS = Number(process.env.BENCH_MQTT_PUBLISHERS ?? 8);
/** The gateway's default uplink window (gateway/src/config.ts). */
const WINDOW = Number(process.env.BENCH_MQTT_WINDOW ?? 100);
const DEVICES = 50;
const SIZES = [1, 32];
/** A round's load generator (one thread) or broker at or above this share of one core was the limit. */
const CORE_BOUND = 90;
/** A round with the machine busier than this was limited by CPU (generator, server, database together). */
const MACHINE_BOUND = 95;
export interface MqttRound {
  messagesPerSec: number;
  /** CPU of this process (the load generator), % of one core. */
  generatorCpu: number;
  /** CPU of the broker's process, % of one core. */
  serverCpu: number;
  /** The machine's non-idle time, % of all its cores. */
  machineBusy: number;
  steal: number;
  failed: number;
}

export interface MqttRow {
  target: string;
  perMessage: number;
  devices: number;
  publishers: number;
  inFlightPerPublisher: number;
  /** The median round's. */
  messagesPerSec: number;
  measurementsPerSec: number;
  ratioToBareAedes: number | null;
  goal: string;
  limit: string;
  failed: number;
  peakRssMiB: number | null;
  rounds: MqttRound[];
}

interface BrokerProcess {
  port: number;
  pid: number;
  stop: () => Promise<void>;
}

interface Bundle {
  cert: string;
  key: string;
  ca: string;
}

interface Target {
  name: string;
  port: number;
  pid: number;
  bundle: Bundle;
  topics: string[];
  peakRssMiB: () => number;
  stop: () => Promise<void>;
}

/**
 * `PUBLISHERS` clients each keeping `WINDOW` QoS 1 messages in flight for `seconds` (after one
 * unmeasured second); answers PUBACKs per second and the CPU figures of the measured part.
 */
async function load(target: Target, payload: string, seconds: number): Promise<MqttRound> {
  const clients: MqttClient[] = [];
  for (let i = 0; i < PUBLISHERS; i++) {
    clients.push(
      await mqtt.connectAsync(`mqtts://127.0.0.1:${target.port}`, {
        protocolVersion: 5,
        reconnectPeriod: 0,
        clientId: `bench-${i}-${process.pid}`,
        ...target.bundle,
      }),
    );
  }
  let counting = false;
  let acked = 0;
  let failed = 0;
  const reasons: Record<string, number> = {};
  let stopAt = Number.POSITIVE_INFINITY;
  const running = clients.map(
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
          const topic = target.topics[(c * WINDOW + n++) % target.topics.length]!;
          client.publish(topic, payload, { qos: 1 }, (err, packet) => {
            outstanding--;
            if (counting) {
              if (err) {
                failed++;
                const reason = (packet as { properties?: { reasonString?: string } } | undefined)?.properties
                  ?.reasonString;
                const key = `${String((err as { code?: unknown }).code)} ${reason ?? err.message}`;
                reasons[key] = (reasons[key] ?? 0) + 1;
              } else acked++;
            }
            next();
          });
        };
        for (let i = 0; i < WINDOW; i++) next();
      }),
  );
  await new Promise((r) => setTimeout(r, 1000));
  counting = true;
  const machine = machineMeter();
  const generatorBefore = process.cpuUsage();
  const serverBefore = cpuMicros(target.pid);
  const started = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  counting = false;
  const elapsedMicros = (performance.now() - started) * 1000;
  const generator = process.cpuUsage(generatorBefore);
  const server = cpuMicros(target.pid) - serverBefore;
  const { idlePercent, stealPercent: steal } = machine();
  const busy = 100 - idlePercent;
  stopAt = Date.now();
  await Promise.all(running);
  for (const client of clients) await client.endAsync();
  if (failed > 0) console.log(`${target.name}: failed publishes`, reasons);
  return {
    messagesPerSec: acked / (elapsedMicros / 1e6),
    generatorCpu: ((generator.user + generator.system) / elapsedMicros) * 100,
    serverCpu: (server / elapsedMicros) * 100,
    machineBusy: busy,
    steal,
    failed,
  };
}

/** Waits until the server's background work after a round (fold, rule engine) is over: its CPU stays still for 100 ms. */
async function quiet(pid: number): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const before = cpuMicros(pid);
    await new Promise((resolve) => setTimeout(resolve, 100));
    if (cpuMicros(pid) - before < 5_000) return;
  }
}

async function startMosquitto(pkiDir: string, work: string): Promise<BrokerProcess> {
  const port = await freePort();
  const conf = path.join(work, 'mosquitto.conf');
  fs.writeFileSync(
    conf,
    [
      'user root',
      `listener ${port} 127.0.0.1`,
      'allow_anonymous true',
      'persistence false',
      'max_inflight_messages 0',
      'max_queued_messages 100000',
      `cafile ${pkiDir}/ca.crt`,
      `certfile ${pkiDir}/server.crt`,
      `keyfile ${pkiDir}/server.key`,
      'require_certificate true',
      'log_type error',
      '',
    ].join('\n'),
  );
  const child = spawn('mosquitto', ['-c', conf], { stdio: ['ignore', 'ignore', 'inherit'] });
  const broker = brokerProcess(child, port);
  // Ready when it accepts TCP connections.
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  return broker;
}

/** A broker in a child process, stopped with SIGTERM. */
function brokerProcess(child: ChildProcess, port: number): BrokerProcess {
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return {
    port,
    pid: child.pid!,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function startBareAedes(pkiDir: string): Promise<BrokerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/bench/bare-aedes.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, BENCH_PKI_DIR: pkiDir },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /\(MQTT port (\d+)\)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.on('exit', (code) => reject(new Error(`bare aedes exited with ${code}`)));
  });
  return brokerProcess(child, port);
}

async function post(
  url: string,
  pathname: string,
  token: string,
  body: unknown,
): Promise<Record<string, string>> {
  const res = await fetch(`${url}${pathname}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, string>;
  if (!res.ok) throw new Error(`POST ${pathname}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** A cloud with its MQTT bridge, an account of DEVICES devices and a bridge certificate. */
async function cloudTarget(
  name: string,
  env: Record<string, string>,
  cleanup: () => Promise<void>,
): Promise<Target & { dataDir: string }> {
  const dataDir = tempDir('bench-mqtt-');
  const mqttPort = await freePort();
  let server: ServerProcess | null = null;
  const stop = async () => {
    await server?.stop();
    await cleanup();
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    server = await startServer('cloud/src/main.ts', {
      DATA_DIR: dataDir,
      MQTT_PORT: String(mqttPort),
      RATE_LIMIT_MGMT_PER_MIN: '100000',
      ...env,
    });
    const account = await setUpAccount(server.url, dataDir, DEVICES);
    const bridge = await post(server.url, '/v1/bridges', account.token, {
      site_id: account.siteId,
      name: 'bench',
    });
    const started = server;
    return {
      name,
      port: mqttPort,
      pid: started.pid,
      bundle: { cert: bridge.cert_pem!, key: bridge.key_pem!, ca: bridge.ca_pem! },
      topics: account.devices.map((d) => `${bridge.topic_root}${d.localId}`),
      peakRssMiB: () => started.peakRssMiB(),
      stop,
      dataDir,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

function goal(row: MqttRow): string {
  if (row.perMessage !== 1 || row.ratioToBareAedes === null) return '';
  const wanted = row.target.endsWith('SQLite') ? 0.5 : row.target.endsWith('PostgreSQL') ? 0.35 : null;
  if (wanted === null) return '';
  return `>= ${wanted} of bare aedes: ${row.ratioToBareAedes >= wanted ? 'met' : 'NOT met'}`;
}

/**
 * What limited a target's rounds: the load generator's one thread, the broker's CPU, the machine's
 * CPU, or else latency (no process at its limit: the broker waits, e.g. for its commits).
 */
function limitOf(rounds: MqttRound[]): string {
  const generator = median(rounds.map((r) => r.generatorCpu));
  const server = median(rounds.map((r) => r.serverCpu));
  const busy = median(rounds.map((r) => r.machineBusy));
  if (generator >= CORE_BOUND) return `load generator (${Math.round(generator)} % of a core)`;
  if (server >= CORE_BOUND) return `server CPU (${Math.round(server)} % of a core)`;
  if (busy >= MACHINE_BOUND) return `machine CPU (${Math.round(busy)} % busy)`;
  return 'latency (no process at its CPU limit)';
}

export async function benchMqtt(postgresUrl: string | null): Promise<MqttRow[]> {
  const targets: Target[] = [];
  const work = tempDir('bench-mqtt-pki-');
  try {
    const sqlite = await cloudTarget('cloud bridge on SQLite', {}, async () => undefined);
    targets.push(sqlite);
    if (postgresUrl) {
      const db = await throwawayPostgres(postgresUrl);
      targets.push(await cloudTarget('cloud bridge on PostgreSQL', { DATABASE_URL: db.url }, db.drop));
    }
    // The baselines use the SQLite cloud's server certificate and bridge bundle: the same TLS work.
    const pkiDir = path.join(work, 'pki');
    fs.cpSync(path.join(sqlite.dataDir, 'pki'), pkiDir, { recursive: true });
    const baselines = [
      { name: 'bare aedes (no ingest)', server: await startBareAedes(pkiDir) },
      { name: 'Debian Mosquitto (no ingest)', server: await startMosquitto(pkiDir, work) },
    ];
    for (const { name, server } of baselines) {
      targets.push({
        name,
        port: server.port,
        pid: server.pid,
        bundle: sqlite.bundle,
        topics: sqlite.topics,
        peakRssMiB: () => memoryMiB(server.pid).hwm,
        stop: server.stop,
      });
    }

    const rows: MqttRow[] = [];
    for (const perMessage of SIZES) {
      const payload = JSON.stringify({ measurements: measurements(perMessage) });
      // Unmeasured first: JIT, every channel's creation, the rule engine's first look at each channel.
      for (const target of targets) {
        await load(target, payload, WARM_UP_S);
        await quiet(target.pid);
      }
      const rounds = new Map<Target, MqttRound[]>(targets.map((t) => [t, []]));
      for (let r = 0; r < ROUNDS; r++) {
        for (let k = 0; k < targets.length; k++) {
          const target = targets[(r + k) % targets.length]!;
          rounds.get(target)!.push(await load(target, payload, DURATION_S));
          await quiet(target.pid);
        }
      }
      const bare = median(
        rounds.get(targets.find((t) => t.name.startsWith('bare aedes'))!)!.map((m) => m.messagesPerSec),
      );
      for (const target of targets) {
        const done = rounds.get(target)!;
        const rate = median(done.map((m) => m.messagesPerSec));
        const row: MqttRow = {
          target: target.name,
          perMessage,
          devices: target.topics.length,
          publishers: PUBLISHERS,
          inFlightPerPublisher: WINDOW,
          messagesPerSec: Math.round(rate),
          measurementsPerSec: Math.round(rate * perMessage),
          ratioToBareAedes: Math.round((rate / bare) * 100) / 100,
          goal: '',
          limit: limitOf(done),
          failed: done.reduce((n, m) => n + m.failed, 0),
          peakRssMiB: target.peakRssMiB(),
          rounds: done,
        };
        row.goal = goal(row);
        rows.push(row);
      }
    }
    return rows;
  } finally {
    for (const target of targets) await target.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
}

export function mqttTable(rows: MqttRow[]): [string[], (string | number)[][]] {
  const spread = (values: number[]) =>
    `${Math.round(Math.min(...values))}–${Math.round(Math.max(...values))}`;
  const medianOf = (rounds: MqttRound[], pick: (r: MqttRound) => number) =>
    Math.round(median(rounds.map(pick)));
  return [
    [
      'target',
      'measurements/message',
      'devices',
      'publishers × in flight',
      'messages/s (median)',
      'rounds min–max',
      'measurements/s (median)',
      'ratio to bare aedes',
      'issue target',
      'generator CPU %',
      'server CPU %',
      'machine busy %',
      'steal %',
      'limited by',
      'failed',
      'peak RSS MiB',
    ],
    rows.map((r) => [
      r.target,
      r.perMessage,
      r.devices,
      `${r.publishers} × ${r.inFlightPerPublisher}`,
      r.messagesPerSec,
      spread(r.rounds.map((m) => m.messagesPerSec)),
      r.measurementsPerSec,
      r.ratioToBareAedes ?? '',
      r.goal,
      medianOf(r.rounds, (m) => m.generatorCpu),
      medianOf(r.rounds, (m) => m.serverCpu),
      medianOf(r.rounds, (m) => m.machineBusy),
      medianOf(r.rounds, (m) => m.steal),
      r.limit,
      r.failed,
      r.peakRssMiB ?? '',
    ]),
  ];
}
