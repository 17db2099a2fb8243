import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { signUp, startTestCloud } from '../../test/helpers/cloud.ts';
import { tempDir, type DbKind } from '../../test/helpers/databases.ts';
import { createDevice, createSite } from '../../test/helpers/fixtures.ts';
import { HttpClient } from '../../test/helpers/http.ts';
import { createBridge, type BridgeBundle } from '../../test/helpers/mqtt.ts';
import { ROOT } from '../../test/helpers/process.ts';
import { readingKey } from './types.ts';

const run = promisify(execFile);

/**
 * A cloud installation as an operator runs it, for the chaos scenarios: a data directory and a
 * database of its own, one account with a site, HTTP devices and an MQTT bridge, and the cloud
 * itself as a separate process (`npm start`'s entry point) that a scenario may SIGKILL and start
 * again on the same data, on the same ports, so that senders reconnect as they would to a real host.
 */
export interface Installation {
  db: DbKind;
  dataDir: string;
  databaseUrl: string;
  httpPort: number;
  mqttPort: number;
  url: string;
  mqttUrl: string;
  adminToken: string;
  accountId: string;
  /** `service/<account id>`: the bridge's topic root. */
  topicRoot: string;
  bridge: BridgeBundle;
  /** HTTP devices made through the API: local id and ingest token. */
  devices: { localId: string; token: string }[];
  /** The environment every start of the cloud gets. */
  env: Record<string, string>;
  dispose(): Promise<void>;
}

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * A fresh database: a SQLite file in the data directory, or a new database on the PostgreSQL server
 * at `postgresUrl` (dropped by `dispose`). A spawned cloud cannot be given a schema, so each
 * installation on PostgreSQL has a database of its own.
 */
async function freshDatabase(
  db: DbKind,
  dataDir: string,
  postgresUrl: string | undefined,
): Promise<{ url: string; drop(): Promise<void> }> {
  if (db === 'sqlite')
    return { url: `sqlite:${path.join(dataDir, 'cloud.db')}`, drop: async () => undefined };
  if (!postgresUrl) throw new Error('PostgreSQL needs TEST_DATABASE_URL (or a server of the scenario)');
  const name = `chaos_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: postgresUrl });
  admin.on('error', () => undefined); // a failed connect rejects too
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(postgresUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: postgresUrl });
      c.on('error', () => undefined); // a failed connect rejects too
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/**
 * Makes the installation through the API of an in-process cloud on the same data (sign-up, site,
 * `httpDevices` devices, a bridge), then stops that cloud: from here on only spawned processes run.
 */
export async function prepareInstallation(options: {
  db: DbKind;
  httpDevices: number;
  /** The PostgreSQL server to make the database on; TEST_DATABASE_URL by default. */
  postgresUrl?: string;
  env?: Record<string, string>;
}): Promise<Installation> {
  const dataDir = tempDir('sm-chaos-');
  const database = await freshDatabase(
    options.db,
    dataDir,
    options.postgresUrl ?? process.env.TEST_DATABASE_URL,
  );
  const httpPort = await freePort();
  const mqttPort = await freePort();
  const env = {
    DATA_DIR: dataDir,
    DATABASE_URL: database.url,
    PORT: String(httpPort),
    MQTT_PORT: String(mqttPort),
    BASE_URL: `http://127.0.0.1:${httpPort}`,
    MQTT_URL: `mqtts://127.0.0.1:${mqttPort}`,
    RATE_LIMIT_INGEST_PER_MIN: '1000000000',
    RATE_LIMIT_MGMT_PER_MIN: '1000000',
    RATE_LIMIT_READ_PER_MIN: '1000000',
    ...options.env,
  };
  const setup = await startTestCloud({ env: { ...env, PORT: '0', MQTT_PORT: '0', LOG_LEVEL: 'warn' } });
  try {
    const user = await signUp(setup, 'chaos@example.com');
    const site = await createSite(setup, user.token);
    const devices: Installation['devices'] = [];
    for (let i = 0; i < options.httpDevices; i++) {
      const d = await createDevice(setup, user.token, site.id, { local_id: `http-${i}` });
      devices.push({ localId: d.local_id, token: d.ingest_token });
    }
    const bridge = await createBridge(setup, user.token, site.id);
    return {
      db: options.db,
      dataDir,
      databaseUrl: database.url,
      httpPort,
      mqttPort,
      url: `http://127.0.0.1:${httpPort}`,
      mqttUrl: `mqtts://127.0.0.1:${mqttPort}`,
      adminToken: user.token,
      accountId: user.accountId,
      topicRoot: `service/${user.accountId}`,
      bridge,
      devices,
      env,
      dispose: async () => {
        await database.drop();
        fs.rmSync(dataDir, { recursive: true, force: true });
      },
    };
  } finally {
    await setup.cloud.stop();
    await setup.database.dispose();
  }
}

/** Cloud processes started and not ended: killed when this process exits, so none is left behind. */
const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** One process of the cloud. */
export interface CloudRun {
  child: ChildProcess;
  pid: number;
  /** Resolves with the exit code or signal when the process ends. */
  exited: Promise<number | string>;
  /** Log lines at error level or above (5xx, failed jobs), the first 50 kept whole. */
  errors: { count: number; first: string[] };
  /** The process's resident memory now, in bytes (0 once it has ended). */
  rss(): number;
  /** What it wrote to stderr (the first 20,000 characters): a crash's stack. */
  stderr(): string;
}

/**
 * Starts the cloud as `npm start` does on the installation's ports and data and resolves once it
 * listens. Its log is read line by line and not kept, except lines at error level.
 */
export async function startCloud(inst: Installation, env: Record<string, string> = {}): Promise<CloudRun> {
  // CHAOS_CLOUD_NODE_ARGS: Node's flags for the cloud that NODE_OPTIONS refuses, space-separated
  // (`--cpu-prof --cpu-prof-dir=/tmp/prof` profiles each cloud process until it stops cleanly).
  const nodeArgs = (process.env.CHAOS_CLOUD_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'cloud/src/main.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      SHUTDOWN_DRAIN_MS: '0',
      // CHAOS_CLOUD_NODE_OPTIONS: Node's options for the cloud (a heap limit, say).
      ...(process.env.CHAOS_CLOUD_NODE_OPTIONS ? { NODE_OPTIONS: process.env.CHAOS_CLOUD_NODE_OPTIONS } : {}),
      ...inst.env,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  child.on('exit', () => live.delete(child));
  const errors = { count: 0, first: [] as string[] };
  const exited = new Promise<number | string>((resolve) =>
    child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => {
    if (stderr.length < 20_000) stderr += c.toString();
  });
  let ready = false;
  await new Promise<void>((resolve, reject) => {
    let partial = '';
    child.stdout.on('data', (c: Buffer) => {
      const lines = (partial + c.toString()).split('\n');
      partial = lines.pop()!;
      if (partial.length > 100_000) partial = '';
      for (const line of lines) {
        if (!ready && /\(HTTP port \d+\)/.test(line)) {
          ready = true;
          resolve();
        }
        if (line.startsWith('{') && /"level":(5|6)\d/.test(line)) {
          errors.count++;
          if (errors.first.length < 50) errors.first.push(line.slice(0, 2000));
        }
      }
    });
    void exited.then((code) => {
      if (!ready) reject(new Error(`cloud exited (${code}) before listening:\n${stderr}`));
    });
  });
  const pid = child.pid!;
  return {
    child,
    pid,
    exited,
    errors,
    stderr: () => stderr,
    rss: () => {
      try {
        const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
        const kb = /VmRSS:\s+(\d+) kB/.exec(status);
        return kb ? Number(kb[1]) * 1024 : 0;
      } catch {
        return 0;
      }
    },
  };
}

/** SIGKILL, and waits until the process is gone. */
export async function killCloud(run: CloudRun): Promise<void> {
  if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
  await run.exited;
}

/** SIGTERM (a clean stop), and waits; SIGKILL after 30 s. */
export async function stopCloud(run: CloudRun): Promise<number | string> {
  if (run.child.exitCode !== null || run.child.signalCode !== null) return run.exited;
  run.child.kill('SIGTERM');
  const timer = setTimeout(() => run.child.kill('SIGKILL'), 30_000);
  const code = await run.exited;
  clearTimeout(timer);
  return code;
}

/** `2026-01-05T10:00:00.123456Z` in microseconds since the epoch. */
export function micros(iso: string): number {
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?Z$/.exec(iso);
  if (!m) throw new Error(`not an RFC 3339 UTC time: ${iso}`);
  return Date.parse(`${m[1]}Z`) * 1000 + Number((m[2] ?? '').padEnd(6, '0'));
}

/**
 * What the cloud's API says is stored: every measurement of the account, from the account export
 * (`POST /v1/accounts/me/export`, its `measurements.csv`), as `readingKey`s of the device's local
 * id (from `GET /v1/devices`), the measurement type and its time (or, `by: 'value'`, its value, for
 * readings whose time the gateway stamps). A key appears once per stored row.
 */
export async function storedKeys(
  inst: Pick<Installation, 'url' | 'adminToken' | 'dataDir'>,
  by: 'ts' | 'value' = 'ts',
): Promise<string[]> {
  const http = new HttpClient(inst.url);
  const localIds = new Map<string, string>();
  for (let cursor: string | null = null; ;) {
    const page = await http.get(
      `/v1/devices?account_id=me&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      { token: inst.adminToken },
    );
    if (page.status !== 200) throw new Error(`GET /v1/devices: ${page.status} ${page.text}`);
    const body = page.json as { data: { id: string; local_id: string }[]; next_cursor: string | null };
    for (const d of body.data) localIds.set(d.id, d.local_id);
    cursor = body.next_cursor;
    if (!cursor) break;
  }
  const response = await fetch(`${inst.url}/v1/accounts/me/export`, {
    method: 'POST',
    headers: { authorization: `Bearer ${inst.adminToken}` },
  });
  if (response.status !== 200) throw new Error(`export: ${response.status} ${await response.text()}`);
  const zip = path.join(inst.dataDir, `chaos-export-${Date.now()}.zip`);
  fs.writeFileSync(zip, Buffer.from(await response.arrayBuffer()));
  const { stdout } = await run('unzip', ['-p', zip, 'measurements.csv'], { maxBuffer: 1 << 30 });
  fs.rmSync(zip);
  const lines = stdout.split('\n');
  const header = lines[0]!.split(',');
  const at = (name: string) => header.indexOf(name);
  const [ts, device, type, value] = [at('ts'), at('device_id'), at('type'), at('value')];
  const keys: string[] = [];
  for (const line of lines.slice(1)) {
    if (!line) continue;
    // The columns read here hold ids, types and times: never a comma or a quote.
    const cells = line.split(',');
    const localId = localIds.get(cells[device]!) ?? cells[device]!;
    keys.push(readingKey(localId, cells[type]!, by === 'ts' ? micros(cells[ts]!) : Number(cells[value]!)));
  }
  return keys;
}
