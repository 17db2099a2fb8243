import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import {
  freePort,
  memoryMiB,
  ROOT,
  setUpAccount,
  startServer,
  tempDir,
  throwawayPostgres,
  type ServerProcess,
} from './lib.ts';

/**
 * MQTT bridge throughput (issue 6): measurements/s through the cloud's bridge (PUBACK after the
 * ingest group committed) with several concurrent QoS 1 publishers, against the same load on a bare
 * aedes broker with no ingest and on Debian's Mosquitto, all over mutual TLS, in the same run.
 * The load generator (mqtt.js) runs in this process: its ceiling shows in the bare baselines.
 */
const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP_S = 1;
const PUBLISHERS = Number(process.env.BENCH_MQTT_PUBLISHERS ?? 8);
const WINDOW = Number(process.env.BENCH_MQTT_WINDOW ?? 50);
const DEVICES = 50;

export interface MqttRow {
  target: string;
  publishers: number;
  inFlightPerPublisher: number;
  measurementsPerSec: number;
  ratioToBareAedes: number | null;
  failed: number;
  peakRssMiB: number | null;
}

interface Bundle {
  cert: string;
  key: string;
  ca: string;
}

/** PUBACKs per second with `PUBLISHERS` clients each keeping `WINDOW` QoS 1 messages in flight. */
async function load(
  port: number,
  bundle: Bundle,
  topics: string[],
): Promise<{ perSec: number; failed: number; reasons: Record<string, number> }> {
  const clients: MqttClient[] = [];
  for (let i = 0; i < PUBLISHERS; i++) {
    clients.push(
      await mqtt.connectAsync(`mqtts://127.0.0.1:${port}`, {
        protocolVersion: 5,
        reconnectPeriod: 0,
        clientId: `bench-${i}-${process.pid}`,
        ...bundle,
      }),
    );
  }
  const payload = JSON.stringify({ measurements: [{ type: 'temperature', value: 4.2 }] });
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
          const topic = topics[(c * WINDOW + n++) % topics.length]!;
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
  await new Promise((r) => setTimeout(r, WARMUP_S * 1000));
  counting = true;
  const started = performance.now();
  await new Promise((r) => setTimeout(r, DURATION_S * 1000));
  counting = false;
  const elapsed = (performance.now() - started) / 1000;
  stopAt = Date.now();
  await Promise.all(running);
  for (const client of clients) await client.endAsync();
  if (failed > 0) console.log(`failed publishes on port ${port}:`, reasons);
  return { perSec: acked / elapsed, failed, reasons };
}

async function startMosquitto(
  pkiDir: string,
  work: string,
): Promise<{ port: number; pid: number; stop: () => Promise<void> }> {
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
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
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
  return {
    port,
    pid: child.pid!,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
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

export async function benchMqtt(postgresUrl: string | null): Promise<MqttRow[]> {
  const rows: MqttRow[] = [];
  const targets: {
    name: string;
    env: () => Promise<{ env: Record<string, string>; cleanup: () => Promise<void> }>;
  }[] = [{ name: 'cloud bridge on SQLite', env: async () => ({ env: {}, cleanup: async () => undefined }) }];
  if (postgresUrl) {
    targets.push({
      name: 'cloud bridge on PostgreSQL',
      env: async () => {
        const db = await throwawayPostgres(postgresUrl);
        return { env: { DATABASE_URL: db.url }, cleanup: db.drop };
      },
    });
  }
  const cloudRows: MqttRow[] = [];
  let firstPki: { dir: string; bundle: Bundle; topics: string[]; work: string } | null = null;
  for (const target of targets) {
    const dataDir = tempDir('bench-mqtt-');
    const { env, cleanup } = await target.env();
    const mqttPort = await freePort();
    const server: ServerProcess = await startServer('cloud/src/main.ts', {
      DATA_DIR: dataDir,
      MQTT_PORT: String(mqttPort),
      RATE_LIMIT_MGMT_PER_MIN: '100000',
      ...env,
    });
    try {
      const account = await setUpAccount(server.url, dataDir, DEVICES);
      const bridge = await post(server.url, '/v1/bridges', account.token, {
        site_id: account.siteId,
        name: 'bench',
      });
      const bundle = { cert: bridge.cert_pem!, key: bridge.key_pem!, ca: bridge.ca_pem! };
      const topics = account.devices.map((d) => `${bridge.topic_root}${d.localId}`);
      const r = await load(mqttPort, bundle, topics);
      if (r.failed > 0) console.log(`${target.name}: the server's log is ${server.logFile}`);
      cloudRows.push({
        target: target.name,
        publishers: PUBLISHERS,
        inFlightPerPublisher: WINDOW,
        measurementsPerSec: Math.round(r.perSec),
        ratioToBareAedes: null,
        failed: r.failed,
        peakRssMiB: server.peakRssMiB(),
      });
      if (!firstPki) {
        // Keep a copy of the PKI for the baselines (same certificates, same TLS work).
        const work = tempDir('bench-mqtt-pki-');
        fs.cpSync(path.join(dataDir, 'pki'), path.join(work, 'pki'), { recursive: true });
        firstPki = { dir: path.join(work, 'pki'), bundle, topics, work };
      }
    } finally {
      await server.stop();
      await cleanup();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }
  if (!firstPki) throw new Error('no cloud target ran');

  const bare = await startBareAedes(firstPki.dir);
  const bareRate = await (async () => {
    try {
      const r = await load(bare.port, firstPki.bundle, firstPki.topics);
      rows.push({
        target: 'bare aedes (no ingest)',
        publishers: PUBLISHERS,
        inFlightPerPublisher: WINDOW,
        measurementsPerSec: Math.round(r.perSec),
        ratioToBareAedes: 1,
        failed: r.failed,
        peakRssMiB: memoryMiB(bare.pid).hwm,
      });
      return r.perSec;
    } finally {
      await bare.stop();
    }
  })();
  const mosquitto = await startMosquitto(firstPki.dir, firstPki.work);
  try {
    const r = await load(mosquitto.port, firstPki.bundle, firstPki.topics);
    rows.push({
      target: 'Debian Mosquitto (no ingest)',
      publishers: PUBLISHERS,
      inFlightPerPublisher: WINDOW,
      measurementsPerSec: Math.round(r.perSec),
      ratioToBareAedes: Math.round((r.perSec / bareRate) * 100) / 100,
      failed: r.failed,
      peakRssMiB: memoryMiB(mosquitto.pid).hwm,
    });
  } finally {
    await mosquitto.stop();
    fs.rmSync(firstPki.work, { recursive: true, force: true });
  }
  for (const row of cloudRows)
    row.ratioToBareAedes = Math.round((row.measurementsPerSec / bareRate) * 100) / 100;
  return [...cloudRows, ...rows];
}

async function startBareAedes(
  pkiDir: string,
): Promise<{ port: number; pid: number; stop: () => Promise<void> }> {
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

export function mqttTable(rows: MqttRow[]): [string[], (string | number)[][]] {
  return [
    [
      'target',
      'QoS 1 publishers',
      'in flight each',
      'measurements/s',
      'ratio to bare aedes',
      'failed',
      'peak RSS MiB',
    ],
    rows.map((r) => [
      r.target,
      r.publishers,
      r.inFlightPerPublisher,
      r.measurementsPerSec,
      r.ratioToBareAedes ?? '',
      r.failed,
      r.peakRssMiB ?? '',
    ]),
  ];
}
