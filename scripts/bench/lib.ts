import { spawn, type ChildProcess, type ChildProcessByStdio } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import pg from 'pg';

/** Shared pieces of the benchmarks: server processes, peak RSS, a throwaway PostgreSQL database, tables. */
export const ROOT = path.resolve(import.meta.dirname, '../..');

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  pid: number;
  /** The file its stdout and stderr go to. */
  logFile: string;
  /** Peak resident set size so far, MiB (VmHWM). */
  peakRssMiB(): number;
  stop(): Promise<void>;
}

/** A TCP port free on 127.0.0.1 now, for a child process that must be told its port up front. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A process's resident set size now (`rss`) and at its peak so far (`hwm`), MiB. */
export function memoryMiB(pid: number): { rss: number; hwm: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0);
  return { rss: Math.round(kb('VmRSS') / 1024), hwm: Math.round(kb('VmHWM') / 1024) };
}

/** The middle value (of an even count, the upper of the two middle ones). */
/**
 * The knobs every bench that compares targets in rounds reads from the environment: how long each
 * load runs (`BENCH_DURATION`, seconds), how many rounds (`BENCH_ROUNDS`) and how long each target
 * warms up first (`BENCH_WARM_UP`, seconds; the default is the bench's own).
 */
export function roundKnobs(warmUpDefaultS: number): { durationS: number; rounds: number; warmUpS: number } {
  return {
    durationS: Number(process.env.BENCH_DURATION ?? 5),
    rounds: Number(process.env.BENCH_ROUNDS ?? 3),
    warmUpS: Number(process.env.BENCH_WARM_UP ?? warmUpDefaultS),
  };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** CPU time (user + system) a process has used so far, µs. */
export function cpuMicros(pid: number): number {
  return statMicros(pid, 14);
}

/**
 * CPU time (user + system) of this process's children that have exited and been waited for, µs: a
 * load generator's, read before and after it runs.
 */
export function childrenCpuMicros(): number {
  return statMicros(process.pid, 16);
}

/**
 * CPU time of the process and of its children that have exited and been waited for, µs: a server
 * that forks a process per connection (PostgreSQL) keeps the time of its ended backends this way.
 */
export function cpuWithReapedMicros(pid: number): number {
  return statMicros(pid, 14) + statMicros(pid, 16);
}

/** Fields `field` and `field + 1` (1-based, as proc(5) counts them) of /proc/PID/stat, summed, µs. */
function statMicros(pid: number, field: number): number {
  // Counted after the command name (field 2, which may hold spaces): field 3 is index 0.
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[field - 3]) + Number(fields[field - 2])) * 1_000_000) / CLOCK_TICKS;
}

/** Linux's USER_HZ: the unit of /proc's CPU times (100 on every architecture Node runs on). */
const CLOCK_TICKS = 100;

/**
 * Starts measuring the machine's time: steal (the share its hypervisor gave to other guests) and idle
 * (the share no process of this machine used). Call the returned function at the end; it answers
 * both as percentages since the start.
 */
export function machineMeter(): () => { stealPercent: number; idlePercent: number } {
  const read = () => {
    const cpu = fs
      .readFileSync('/proc/stat', 'utf8')
      .split('\n')[0]!
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    // user nice system idle iowait irq softirq steal ...
    return { idle: (cpu[3] ?? 0) + (cpu[4] ?? 0), steal: cpu[7] ?? 0, total: cpu.reduce((a, b) => a + b, 0) };
  };
  const start = read();
  return () => {
    const end = read();
    const total = end.total - start.total;
    const share = (key: 'idle' | 'steal') => (total > 0 ? ((end[key] - start[key]) / total) * 100 : 0);
    return { stealPercent: share('steal'), idlePercent: share('idle') };
  };
}

export function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** Where the servers of this bench run write their output: one file each (bench-results is git-ignored). */
const LOG_DIR = path.join(ROOT, 'bench-results', 'logs', new Date().toISOString().replace(/[:.]/g, '-'));
let serversStarted = 0;

/**
 * Starts a TypeScript entry point in its own process and waits for `(HTTP port N)` on stdout. The
 * process's output (its JSON log at LOG_LEVEL, warn unless the bench's environment says otherwise)
 * goes to a file of its own, `logFile`, so a failure a table shows can be looked up afterwards.
 */
export async function startServer(
  entry: string,
  env: Record<string, string>,
  nodeArgs: string[] = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean),
): Promise<ServerProcess> {
  const { child, logFile } = spawnLogged(
    process.execPath,
    [...nodeArgs, '--import', 'tsx', entry],
    {
      PATH: process.env.PATH ?? '',
      HOST: '127.0.0.1',
      PORT: '0',
      MQTT_PORT: '0',
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
      ...env,
    },
    path.basename(entry, '.ts'),
  );
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    const scan = (c: Buffer) => {
      out += c.toString();
      const m = /\(HTTP port (\d+)\)/.exec(out);
      if (!m) return;
      child.stdout.off('data', scan);
      resolve(Number(m[1]));
    };
    child.stdout.on('data', scan);
    child.on('exit', (code) =>
      reject(new Error(`${entry} exited with ${code} before listening (log: ${logFile})`)),
    );
  });
  return serverProcess(child, `http://127.0.0.1:${port}`, logFile);
}

/**
 * Starts `command` with exactly `env`, its stdout and stderr into a log file of its own under this
 * run's log folder (`name` in the file's name), stderr also to the bench's.
 */
export function spawnLogged(
  command: string,
  args: string[],
  env: Record<string, string>,
  name: string,
): { child: ChildProcessByStdio<null, Readable, Readable>; logFile: string } {
  fs.mkdirSync(LOG_DIR, { recursive: true });
  const logFile = path.join(LOG_DIR, `${++serversStarted}-${name}.log`);
  const log = fs.createWriteStream(logFile);
  const child = spawn(command, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.pipe(log);
  child.stderr.pipe(log);
  child.stderr.pipe(process.stderr);
  return { child, logFile };
}

/** A started server as the benches use it; `stop()` sends SIGTERM and waits for the exit. */
export function serverProcess(child: ChildProcess, url: string, logFile: string): ServerProcess {
  const pid = child.pid!;
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return {
    child,
    pid,
    url,
    logFile,
    peakRssMiB: () => memoryMiB(pid).hwm,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** A database of its own on the PostgreSQL server, dropped by `drop()`. */
export async function throwawayPostgres(
  adminUrl: string,
): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `bench_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

async function call(url: string, method: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await response.json()) as Record<string, unknown>;
  if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${JSON.stringify(json)}`);
  return json;
}

/** A JSON client of the cloud's API with a user token; any answer other than 2xx throws. */
export function apiClient(baseUrl: string, token: string) {
  return async <T = Record<string, string>>(method: string, p: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${baseUrl}${p}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await res.json()) as T;
    if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
}

/**
 * Signs up through the API as a person would (code from the outbox), then makes an admin token,
 * a site and `devices` devices. Returns the user token and each device's ingest token. `names`
 * gives the person and the site other names than the benchmarks' (the demo's).
 */
export async function setUpAccount(
  url: string,
  dataDir: string,
  devices: number,
  names: { email?: string; site?: string } = {},
): Promise<{ token: string; siteId: string; devices: { localId: string; id: string; token: string }[] }> {
  const email = names.email ?? 'bench@example.com';
  await call(`${url}/v1/auth/request`, 'POST', { email });
  const outbox = path.join(dataDir, 'outbox');
  let code: string | undefined;
  for (let i = 0; i < 500 && !code; i++) {
    for (const file of fs.existsSync(outbox) ? fs.readdirSync(outbox) : []) {
      code = /^Subject: Your sign-in code: (\w{3}-\w{3})$/m.exec(
        fs.readFileSync(path.join(outbox, file), 'utf8'),
      )?.[1];
    }
    if (!code) await new Promise((r) => setTimeout(r, 20));
  }
  if (!code) throw new Error('no sign-in mail in the outbox');
  const verified = await fetch(`${url}/v1/auth/verify`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, code }),
  });
  const cookie = verified.headers.getSetCookie()[0]!.split(';')[0]!;
  const token = (await call(`${url}/v1/tokens`, 'POST', { label: 'bench', scope: 'admin' }, { cookie }))
    .token as string;
  const auth = { authorization: `Bearer ${token}` };
  const siteId = (
    await call(`${url}/v1/sites`, 'POST', { name: names.site ?? 'Bench', vertical: 'food_service' }, auth)
  ).id as string;
  const made = [];
  for (let i = 0; i < devices; i++) {
    const d = await call(
      `${url}/v1/devices`,
      'POST',
      { site_id: siteId, local_id: `bench-${i}`, name: `Bench ${i}`, model: 'http-generic' },
      auth,
    );
    made.push({ localId: `bench-${i}`, id: d.id as string, token: d.ingest_token as string });
  }
  return { token, siteId, devices: made };
}

export function printTable(title: string, header: string[], rows: (string | number)[][]): void {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, c) => Math.max(...cells.map((r) => r[c]!.length)));
  const line = (r: string[]) => `| ${r.map((v, c) => v.padEnd(widths[c]!)).join(' | ')} |`;
  console.log(`\n${title}\n`);
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of cells.slice(1)) console.log(line(r));
}

export function writeResults(name: string, data: unknown): string {
  const dir = path.join(ROOT, 'bench-results');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${name}-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  fs.writeFileSync(file, JSON.stringify(data, null, 2));
  return file;
}
