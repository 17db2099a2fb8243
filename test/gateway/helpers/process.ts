import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { ROOT } from '../../helpers/process.ts';

export interface GatewayProcess {
  child: ChildProcess;
  /** Parsed JSON log lines so far. */
  logs: Record<string, unknown>[];
  /** The Shelly HTTP listener's port, from its "listening" log line. */
  shellyHttpPort: number;
  exited: Promise<number | string>;
  kill(signal: NodeJS.Signals): Promise<number | string>;
}

/**
 * Starts the gateway as `npm run gateway -- --config FILE` does (or, given `bundle`, as the
 * production build runs: `node gateway.mjs --config FILE` from the bundle's own folder), and waits
 * until it has started.
 */
export async function spawnGateway(
  configFile: string,
  options: { bundle?: string } = {},
): Promise<GatewayProcess> {
  const args = options.bundle
    ? [options.bundle, '--config', configFile]
    : ['--import', 'tsx', 'gateway/src/main.ts', '--config', configFile];
  const child = spawn(process.execPath, args, {
    cwd: options.bundle ? path.dirname(options.bundle) : ROOT,
    env: { PATH: process.env.PATH },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  let partial = '';
  const started = new Promise<number>((resolve, reject) => {
    let port = 0;
    child.stdout.on('data', (c: Buffer) => {
      partial += c.toString();
      const lines = partial.split('\n');
      partial = lines.pop()!;
      for (const line of lines) {
        if (!line) continue;
        const entry = JSON.parse(line) as Record<string, unknown>;
        logs.push(entry);
        if (entry.msg === 'listening for Shelly URL actions') port = entry.port as number;
        if (entry.msg === 'gateway started') resolve(port);
      }
    });
    void exited.then((code) => reject(new Error(`gateway exited (${code}) before starting:\n${stderr}`)));
  });
  const shellyHttpPort = await started;
  return {
    child,
    logs,
    shellyHttpPort,
    exited,
    kill: (signal) => {
      child.kill(signal);
      return exited;
    },
  };
}
