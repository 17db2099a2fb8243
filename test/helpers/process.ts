import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '../..');

export interface CloudProcess {
  child: ChildProcess;
  port: number;
  url: string;
  /** Resolves with the exit code (or signal name) when the process ends. */
  exited: Promise<number | string>;
  stderr(): string;
}

/** Starts the cloud as `npm start` does, in its own process, and waits until it listens. */
export async function spawnCloud(
  env: Record<string, string>,
  /** Called with the child as soon as it is spawned, before it listens (to kill it early). */
  onSpawn?: (child: ChildProcess) => void,
): Promise<CloudProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'cloud/src/main.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      PORT: '0',
      HOST: '127.0.0.1',
      MQTT_PORT: '0',
      LOG_LEVEL: 'warn',
      SHUTDOWN_DRAIN_MS: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  onSpawn?.(child);
  let err = '';
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /\(HTTP port (\d+)\)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    void exited.then((code) => reject(new Error(`cloud exited (${code}) before listening:\n${err}`)));
  });
  return { child, port, url: `http://127.0.0.1:${port}`, exited, stderr: () => err };
}
