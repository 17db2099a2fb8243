import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { pino } from 'pino';
import { Intake } from '../../gateway/src/buffer/intake.ts';
import { ReadingQueue } from '../../gateway/src/buffer/reading-queue.ts';
import { systemClock } from '../../gateway/src/clock.ts';
import { freePort, memoryMiB, ROOT, setUpAccount, startServer, tempDir } from './lib.ts';

/**
 * The gateway benchmark (targets in docs/design/gateway.md): the buffer's durable write rate, the drain rate of a
 * backlog of BENCH_GATEWAY_READINGS readings (default 1 million) to a local cloud over the real
 * mutual-TLS MQTT 5 bridge, and the gateway process's RSS with that backlog buffered and while it
 * drains. A reading is one device's temperature and humidity at one time (one queue row, one MQTT
 * message, two stored measurements).
 */
const READINGS = Number(process.env.BENCH_GATEWAY_READINGS ?? 1_000_000);
const DEVICES = 100;
const silent = pino({ level: 'silent' });

export interface GatewayBenchRow {
  measure: string;
  value: string;
  target: string;
}

function reading(i: number, ts: number) {
  return {
    device: `bench-gw-${i % DEVICES}`,
    ts,
    measurements: [
      {
        kind: 'temperature' as const,
        value: Math.round(Math.sin(i / 100) * 500) / 100 + 4,
        label: null,
        unit: '°C',
      },
      { kind: 'humidity' as const, value: 50 + (i % 40), label: null, unit: '%' },
    ],
  };
}

/** Durable appends per second: one at a time (one fsync each), and in bursts sharing a commit. */
async function writeRates(dir: string): Promise<{ single: number; burst: number }> {
  const queue = new ReadingQueue({
    file: path.join(dir, 'write-rate.db'),
    capacity: 10_000_000,
    log: silent,
  });
  queue.open();
  const intake = new Intake({ queue, clock: systemClock, log: silent });
  const base = Date.now() * 1000;
  let t0 = performance.now();
  const singles = 2000;
  for (let i = 0; i < singles; i++) await intake.accept(reading(i, base + i));
  const single = singles / ((performance.now() - t0) / 1000);
  t0 = performance.now();
  const bursts = 100;
  const burstSize = 500;
  for (let b = 0; b < bursts; b++) {
    await Promise.all(
      Array.from({ length: burstSize }, (_, j) =>
        intake.accept(reading(b * burstSize + j, base + 10_000 + b * burstSize + j)),
      ),
    );
  }
  const burst = (bursts * burstSize) / ((performance.now() - t0) / 1000);
  queue.close();
  return { single, burst };
}

/** Fills the gateway's buffer file with `n` readings, oldest first, an hour back from now. */
export async function fill(file: string, n: number): Promise<void> {
  const queue = new ReadingQueue({ file, capacity: n + 1, log: silent });
  queue.open();
  const intake = new Intake({ queue, clock: systemClock, log: silent });
  const start = (Date.now() - 3600_000) * 1000;
  for (let i = 0; i < n; i += 5000) {
    const batch = [];
    for (let j = i; j < Math.min(n, i + 5000); j++) batch.push(intake.accept(reading(j, start + j * 3)));
    await Promise.all(batch);
  }
  queue.close();
}

export async function benchGateway(): Promise<GatewayBenchRow[]> {
  const work = tempDir('bench-gateway-');
  try {
    process.stdout.write(`gateway: write rates...\n`);
    const rates = await writeRates(work);
    process.stdout.write(`gateway: filling a buffer with ${READINGS} readings...\n`);
    const gwDir = path.join(work, 'gw');
    const fillStart = performance.now();
    await fill(path.join(gwDir, 'data', 'buffer.db'), READINGS);
    const fillSeconds = (performance.now() - fillStart) / 1000;

    const cloudDir = tempDir('bench-gateway-cloud-');
    const mqttPort = await freePort();
    const cloud = await startServer('cloud/src/main.ts', {
      DATA_DIR: cloudDir,
      MQTT_PORT: String(mqttPort),
      RATE_LIMIT_MGMT_PER_MIN: '100000',
    });
    try {
      const account = await setUpAccount(cloud.url, cloudDir, 0);
      const res = await fetch(`${cloud.url}/v1/bridges`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${account.token}` },
        body: JSON.stringify({ site_id: account.siteId, name: 'bench gateway' }),
      });
      const bundle = (await res.json()) as Record<string, string>;
      if (!res.ok) throw new Error(`POST /v1/bridges: ${res.status} ${JSON.stringify(bundle)}`);
      fs.writeFileSync(
        path.join(gwDir, 'bridge.json'),
        JSON.stringify({ ...bundle, mqtt_url: `mqtts://127.0.0.1:${mqttPort}` }),
      );
      fs.writeFileSync(
        path.join(gwDir, 'gateway.yaml'),
        YAML.stringify({
          gateway: { id: 'gw-bench', data_dir: './data', log_level: 'info', status_interval_s: 1 },
          uplink: { bundle: './bridge.json', inflight: Number(process.env.BENCH_GATEWAY_INFLIGHT ?? 200) },
          buffer: { capacity: READINGS * 2 },
          status_page: { host: '127.0.0.1', port: 0 },
          collectors: {},
        }),
      );
      process.stdout.write(`gateway: draining ${READINGS} readings to a local cloud (SQLite)...\n`);
      // The same V8 limits as `npm run gateway` and the systemd unit (package.json "gateway").
      const child = spawn(
        process.execPath,
        [
          '--max-old-space-size=64',
          '--max-semi-space-size=2',
          '--import',
          'tsx',
          'gateway/src/main.ts',
          '--config',
          path.join(gwDir, 'gateway.yaml'),
        ],
        {
          cwd: ROOT,
          env: { PATH: process.env.PATH },
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      const pid = child.pid!;
      let rssBuffered = 0;
      let peakDuringDrain = 0;
      let connectedAt = 0;
      const drained = await new Promise<number>((resolve, reject) => {
        let partial = '';
        child.on('exit', (code) => reject(new Error(`gateway exited with ${code}`)));
        child.stdout.on('data', (c: Buffer) => {
          partial += c.toString();
          const lines = partial.split('\n');
          partial = lines.pop()!;
          for (const line of lines) {
            const entry = JSON.parse(line) as { msg: string; status?: { buffer: { depth: number } } };
            if (entry.msg === 'gateway started') rssBuffered = memoryMiB(pid).rss;
            if (entry.msg === 'uplink connected' && !connectedAt) connectedAt = performance.now();
            if (entry.msg === 'status') {
              peakDuringDrain = Math.max(peakDuringDrain, memoryMiB(pid).rss);
              if (entry.status!.buffer.depth === 0 && connectedAt)
                resolve((performance.now() - connectedAt) / 1000);
            }
          }
        });
      });
      const hwm = memoryMiB(pid).hwm;
      child.removeAllListeners('exit');
      const exited = new Promise((resolve) => child.on('exit', resolve));
      child.kill('SIGTERM');
      await exited;
      return [
        {
          measure: 'buffer write, one reading per commit (fsync each)',
          value: `${Math.round(rates.single)} readings/s`,
          target: '',
        },
        {
          measure: 'buffer write, bursts of 500 (group commit)',
          value: `${Math.round(rates.burst)} readings/s`,
          target: '',
        },
        {
          measure: `buffer fill, ${READINGS} readings`,
          value: `${Math.round(READINGS / fillSeconds)} readings/s`,
          target: '',
        },
        {
          measure: `drain ${READINGS} readings to a local cloud (mTLS MQTT 5, SQLite)`,
          value: `${drained.toFixed(1)} s = ${Math.round(READINGS / drained)} readings/s`,
          target: '< 300 s',
        },
        {
          measure: `gateway RSS at start with ${READINGS} buffered`,
          value: `${rssBuffered} MiB`,
          target: '< 120 MiB',
        },
        {
          measure: 'gateway RSS while draining (max sampled / VmHWM)',
          value: `${peakDuringDrain} / ${hwm} MiB`,
          target: '< 120 MiB',
        },
        { measure: 'cloud peak RSS during the drain', value: `${cloud.peakRssMiB()} MiB`, target: '' },
      ];
    } finally {
      await cloud.stop();
      fs.rmSync(cloudDir, { recursive: true, force: true });
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

export function gatewayTable(rows: GatewayBenchRow[]): [string[], (string | number)[][]] {
  return [['measure', 'value', 'target'], rows.map((r) => [r.measure, r.value, r.target])];
}
