import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './installation.ts';

const run = promisify(execFile);

/**
 * A PostgreSQL server of the scenario's own, from Debian's binaries, in a temporary folder on a free
 * port, so stopping it leaves the machine's server alone. PostgreSQL refuses to run as root: when
 * this process is root, the folder belongs to the `postgres` user and the binaries run as it.
 */
export interface PostgresServer {
  url: string;
  port: number;
  start(): Promise<void>;
  /** `pg_ctl stop -m fast`: connections are ended at once, the server is down when it returns. */
  stop(): Promise<void>;
  dispose(): Promise<void>;
}

function binDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = fs.existsSync(root)
    ? fs.readdirSync(root).filter((v) => fs.existsSync(path.join(root, v, 'bin', 'initdb')))
    : [];
  versions.sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0) throw new Error(`no PostgreSQL server binaries under ${root}`);
  return path.join(root, versions[0]!, 'bin');
}

export async function startPostgresServer(): Promise<PostgresServer> {
  const bin = binDir();
  const asRoot = process.getuid?.() === 0;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sm-chaos-pg-'));
  const data = path.join(dir, 'data');
  const logFile = path.join(dir, 'server.log');
  if (asRoot) {
    fs.chmodSync(dir, 0o755);
    await run('chown', ['postgres:postgres', dir]);
  }
  const pgRun = (tool: string, args: string[]) =>
    asRoot
      ? run('runuser', ['-u', 'postgres', '--', path.join(bin, tool), ...args])
      : run(path.join(bin, tool), args);
  await pgRun('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=100`;
  const server: PostgresServer = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start: async () => {
      await pgRun('pg_ctl', ['-D', data, '-l', logFile, '-o', options, '-w', '-t', '120', 'start']);
    },
    stop: async () => {
      await pgRun('pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '120', 'stop']);
    },
    dispose: async () => {
      await pgRun('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  await server.start();
  return server;
}
