import fs from 'node:fs';
import path from 'node:path';
import { freePort, serverProcess, spawnLogged, tempDir, type ServerProcess } from './lib.ts';

/**
 * InfluxDB 1.x (Debian's `influxdb`: `/usr/bin/influxd`) as a bench target: what a user would pick
 * instead of the cloud to store sensor data. Each start gets a folder of its own (meta, data, WAL, its
 * config) and free ports on 127.0.0.1, so it never meets a system-wide InfluxDB; `stop()` ends it and
 * removes the folder. BENCH_INFLUXD names the binary (default: `influxd` on PATH; `none` skips it).
 */
export const INFLUX_DATABASE = 'bench';

/** The influxd binary to run, or why there is none. */
export function influxd(): { binary: string } | { missing: string } {
  const named = process.env.BENCH_INFLUXD;
  if (named === 'none') return { missing: 'BENCH_INFLUXD=none' };
  if (named)
    return fs.existsSync(named) ? { binary: named } : { missing: `BENCH_INFLUXD=${named}: no such file` };
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const binary = path.join(dir, 'influxd');
    if (dir && fs.existsSync(binary)) return { binary };
  }
  return { missing: 'influxd is not installed (Debian: apt-get install influxdb)' };
}

/**
 * The config: the packaged defaults except where the bench needs isolation (folders, addresses) and
 * quiet (no access log, no query log, warnings only, no `_internal` statistics written every 10 s
 * into a database of its own). The WAL is synced as packaged: `wal-fsync-delay = "0s"`, a write is
 * answered after an fsync of the WAL that holds it (concurrent writes share one fsync).
 */
function config(dir: string, httpPort: number, rpcPort: number): string {
  return `# Written by scripts/bench/influx.ts for one bench run.
# Upstream's key is reporting-disabled; Debian's build reads reporting-enabled (off unless set).
reporting-disabled = true
reporting-enabled = false
bind-address = "127.0.0.1:${rpcPort}"

[meta]
  dir = "${dir}/meta"
  logging-enabled = false

[data]
  dir = "${dir}/data"
  wal-dir = "${dir}/wal"
  wal-fsync-delay = "0s"
  query-log-enabled = false

[monitor]
  store-enabled = false

[http]
  bind-address = "127.0.0.1:${httpPort}"
  log-enabled = false

[continuous_queries]
  log-enabled = false

[logging]
  level = "warn"
  suppress-logo = true
`;
}

/**
 * Starts influxd, waits until `/ping` answers 204 and creates INFLUX_DATABASE. On any failure it
 * stops the process and removes the folder before throwing.
 */
export async function startInfluxd(binary: string): Promise<ServerProcess> {
  const dir = tempDir('bench-influxdb-');
  let server: ServerProcess | null = null;
  try {
    const httpPort = await freePort();
    const rpcPort = await freePort();
    const file = path.join(dir, 'influxdb.conf');
    fs.writeFileSync(file, config(dir, httpPort, rpcPort));
    // Only PATH and HOME: influxd reads INFLUXDB_* variables over its config file.
    const { child, logFile } = spawnLogged(
      binary,
      ['-config', file],
      { PATH: process.env.PATH ?? '', HOME: dir },
      'influxd',
    );
    const url = `http://127.0.0.1:${httpPort}`;
    server = serverProcess(child, url, logFile);
    await ready(server);
    const created = await fetch(`${url}/query`, {
      method: 'POST',
      body: new URLSearchParams({ q: `CREATE DATABASE ${INFLUX_DATABASE}` }),
    });
    if (!created.ok) throw new Error(`influxd: CREATE DATABASE answered ${created.status} (log: ${logFile})`);
    const started = server;
    return {
      ...started,
      stop: async () => {
        await started.stop();
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await server?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** Until `/ping` answers 204; throws when influxd exits first or takes more than 30 s. */
async function ready(server: ServerProcess): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (server.child.exitCode !== null || server.child.signalCode !== null) {
      throw new Error(
        `influxd exited with ${server.child.exitCode} before listening (log: ${server.logFile})`,
      );
    }
    const answered = await fetch(`${server.url}/ping`).then(
      (r) => r.status,
      () => 0,
    );
    if (answered === 204) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`influxd did not answer /ping within 30 s (log: ${server.logFile})`);
}
