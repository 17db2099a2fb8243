import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { buildGateway } from '../build-gateway.ts';
import { fill } from './gateway.ts';
import { freePort, median, memoryMiB, ROOT, setUpAccount, startServer, tempDir } from './lib.ts';

/**
 * The production build against today's tsx start (`BENCH_ONLY=gateway-bundle npm run bench`): the
 * gateway's RSS idle (connected, empty buffer, nothing to do) and while draining a backlog to a local
 * cloud, and the drain time, each start form in every round (alternating which goes first), with the
 * V8 limits of `npm run gateway` for both. Full form: 1,000,000 readings, 3 rounds
 * (BENCH_GATEWAY_BUNDLE_READINGS, BENCH_GATEWAY_BUNDLE_ROUNDS); quick form (BENCH_QUICK=1): 50,000.
 * Targets (the installer's gateway): RSS under 80 MB idle and under 100 MB while draining.
 */
const QUICK = process.env.BENCH_QUICK === '1';
const READINGS = Number(process.env.BENCH_GATEWAY_BUNDLE_READINGS ?? (QUICK ? 50_000 : 1_000_000));
const ROUNDS = Number(process.env.BENCH_GATEWAY_BUNDLE_ROUNDS ?? 3);
/** How long an idle gateway runs after connecting before its RSS is read. */
const IDLE_SETTLE_MS = 5000;
const V8_LIMITS = ['--max-old-space-size=64', '--max-semi-space-size=2'];

type Form = 'tsx' | 'bundle';

interface Round {
  idleRss: number;
  startRss: number;
  drainPeakRss: number;
  drainHwm: number;
  drainSeconds: number;
}

export interface GatewayBundleRow {
  measure: string;
  tsx: string;
  bundle: string;
  ratio: string;
  target: string;
}

function command(form: Form, bundle: string, config: string): { args: string[]; cwd: string } {
  return form === 'tsx'
    ? { args: [...V8_LIMITS, '--import', 'tsx', 'gateway/src/main.ts', '--config', config], cwd: ROOT }
    : { args: [...V8_LIMITS, bundle, '--config', config], cwd: path.dirname(bundle) };
}

/**
 * Runs one gateway until `done(entry, pid)` says so from its log lines, then stops it; returns the
 * process's VmHWM at the end.
 */
async function runGateway(
  form: Form,
  bundle: string,
  config: string,
  onLine: (entry: Record<string, unknown>, pid: number, finish: () => void) => void,
): Promise<number> {
  const { args, cwd } = command(form, bundle, config);
  const child = spawn(process.execPath, args, {
    cwd,
    env: { PATH: process.env.PATH },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const pid = child.pid!;
  await new Promise<void>((resolve, reject) => {
    let partial = '';
    child.on('exit', (code) => reject(new Error(`gateway (${form}) exited with ${code}`)));
    child.stdout.on('data', (c: Buffer) => {
      partial += c.toString();
      const lines = partial.split('\n');
      partial = lines.pop()!;
      for (const line of lines) if (line) onLine(JSON.parse(line) as Record<string, unknown>, pid, resolve);
    });
  });
  const hwm = memoryMiB(pid).hwm;
  child.removeAllListeners('exit');
  const exited = new Promise((resolve) => child.on('exit', resolve));
  child.kill('SIGTERM');
  await exited;
  return hwm;
}

function writeConfig(dir: string, bridgeJson: string, capacity: number): string {
  fs.mkdirSync(path.join(dir, 'data'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'bridge.json'), bridgeJson);
  const file = path.join(dir, 'gateway.yaml');
  fs.writeFileSync(
    file,
    YAML.stringify({
      gateway: { id: 'gw-bench', data_dir: './data', log_level: 'info', status_interval_s: 1 },
      uplink: { bundle: './bridge.json', inflight: Number(process.env.BENCH_GATEWAY_INFLIGHT ?? 200) },
      buffer: { capacity },
      status_page: { host: '127.0.0.1', port: 0 },
      collectors: {},
    }),
  );
  return file;
}

async function oneRound(
  form: Form,
  bundle: string,
  bridgeJson: string,
  work: string,
  round: number,
): Promise<Round> {
  // Idle: connected, empty buffer, left alone for a few seconds.
  const idleDir = path.join(work, `${form}-${round}-idle`);
  const idleConfig = writeConfig(idleDir, bridgeJson, 1000);
  let idleRss = 0;
  await runGateway(form, bundle, idleConfig, (entry, pid, finish) => {
    if (entry.msg === 'uplink connected')
      setTimeout(() => {
        idleRss = memoryMiB(pid).rss;
        finish();
      }, IDLE_SETTLE_MS);
  });

  // Draining: the same backlog for both forms, from a start with it buffered to an empty buffer.
  const drainDir = path.join(work, `${form}-${round}-drain`);
  const drainConfig = writeConfig(drainDir, bridgeJson, READINGS * 2);
  await fill(path.join(drainDir, 'data', 'buffer.db'), READINGS);
  let startRss = 0;
  let peak = 0;
  let connectedAt = 0;
  let drainSeconds = 0;
  const hwm = await runGateway(form, bundle, drainConfig, (entry, pid, finish) => {
    if (entry.msg === 'gateway started') startRss = memoryMiB(pid).rss;
    if (entry.msg === 'uplink connected' && !connectedAt) connectedAt = performance.now();
    if (entry.msg === 'status') {
      peak = Math.max(peak, memoryMiB(pid).rss);
      const depth = (entry.status as { buffer: { depth: number } }).buffer.depth;
      if (depth === 0 && connectedAt) {
        drainSeconds = (performance.now() - connectedAt) / 1000;
        finish();
      }
    }
  });
  fs.rmSync(idleDir, { recursive: true, force: true });
  fs.rmSync(drainDir, { recursive: true, force: true });
  return { idleRss, startRss, drainPeakRss: peak, drainHwm: hwm, drainSeconds };
}

/** `median (min–max)` of the rounds. */
function summary(values: number[], digits = 0): string {
  const f = (v: number) => v.toFixed(digits);
  return `${f(median(values))} (${f(Math.min(...values))}–${f(Math.max(...values))})`;
}

export async function benchGatewayBundle(): Promise<GatewayBundleRow[]> {
  const work = tempDir('bench-gateway-bundle-');
  const cloudDir = tempDir('bench-gateway-bundle-cloud-');
  try {
    process.stdout.write('gateway-bundle: building the bundle...\n');
    const { bundle, bytes } = await buildGateway({ outdir: path.join(work, 'app'), quiet: true });
    const mqttPort = await freePort();
    const cloud = await startServer('cloud/src/main.ts', {
      DATA_DIR: cloudDir,
      MQTT_PORT: String(mqttPort),
      RATE_LIMIT_MGMT_PER_MIN: '100000',
    });
    const rounds: Record<Form, Round[]> = { tsx: [], bundle: [] };
    try {
      const account = await setUpAccount(cloud.url, cloudDir, 0);
      const res = await fetch(`${cloud.url}/v1/bridges`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${account.token}` },
        body: JSON.stringify({ site_id: account.siteId, name: 'bench gateway' }),
      });
      const created = (await res.json()) as Record<string, string>;
      if (!res.ok) throw new Error(`POST /v1/bridges: ${res.status} ${JSON.stringify(created)}`);
      const bridgeJson = JSON.stringify({ ...created, mqtt_url: `mqtts://127.0.0.1:${mqttPort}` });
      for (let r = 0; r < ROUNDS; r++) {
        const order: Form[] = r % 2 === 0 ? ['tsx', 'bundle'] : ['bundle', 'tsx'];
        for (const form of order) {
          process.stdout.write(
            `gateway-bundle: round ${r + 1}/${ROUNDS}, ${form}, ${READINGS} readings...\n`,
          );
          rounds[form].push(await oneRound(form, bundle, bridgeJson, work, r));
        }
      }
    } finally {
      await cloud.stop();
    }
    const row = (
      measure: string,
      pick: (r: Round) => number,
      target: string,
      unit: string,
      digits = 0,
    ): GatewayBundleRow => {
      const tsx = rounds.tsx.map(pick);
      const bun = rounds.bundle.map(pick);
      return {
        measure,
        tsx: `${summary(tsx, digits)} ${unit}`,
        bundle: `${summary(bun, digits)} ${unit}`,
        ratio: (median(bun) / median(tsx)).toFixed(2),
        target,
      };
    };
    return [
      row('RSS idle (connected, empty buffer, after 5 s)', (r) => r.idleRss, '< 80 MB', 'MiB'),
      row(`RSS at start with ${READINGS} readings buffered`, (r) => r.startRss, '', 'MiB'),
      row(`RSS while draining ${READINGS} (max sampled)`, (r) => r.drainPeakRss, '< 100 MB', 'MiB'),
      row(`RSS while draining ${READINGS} (VmHWM)`, (r) => r.drainHwm, '< 100 MB', 'MiB'),
      row(`drain ${READINGS} readings to a local cloud`, (r) => r.drainSeconds, '', 's', 1),
      {
        measure: `bundle size (gateway.mjs), ${ROUNDS} rounds`,
        tsx: '',
        bundle: `${Math.round(bytes / 1024)} KiB`,
        ratio: '',
        target: '',
      },
    ];
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
    fs.rmSync(cloudDir, { recursive: true, force: true });
  }
}

export function gatewayBundleTable(rows: GatewayBundleRow[]): [string[], (string | number)[][]] {
  return [
    ['measure', 'tsx start: median (min–max)', 'bundle: median (min–max)', 'bundle/tsx', 'target'],
    rows.map((r) => [r.measure, r.tsx, r.bundle, r.ratio, r.target]),
  ];
}
