import fs from 'node:fs';
import type { CollectorMemory } from '../../../gateway/src/collector.ts';
import path from 'node:path';
import { Writable } from 'node:stream';
import YAML from 'yaml';
import { loadConfig } from '../../../gateway/src/config.ts';
import { Gateway } from '../../../gateway/src/gateway.ts';
import { createLogger } from '../../../gateway/src/logger.ts';
import { tempDir } from '../../helpers/databases.ts';
import { writeBundle, type TestPki } from './pki.ts';

export interface TestGateway {
  gateway: Gateway;
  dir: string;
  configFile: string;
  logs: Record<string, unknown>[];
  stop(): Promise<void>;
}

/**
 * Writes a gateway configuration file (YAML, as an installer would) and the bridge bundle beside it.
 * `collectors` is the `collectors:` section.
 */
export function writeGatewayConfig(
  dir: string,
  options: {
    /** Writes the bridge bundle file (see `localBundle`, or `saveBundle` for the real cloud). */
    bundle: (file: string) => void;
    collectors?: Record<string, unknown>;
    uplink?: Record<string, unknown>;
    buffer?: Record<string, unknown>;
    statusPage?: Record<string, unknown>;
    gatewayId?: string;
  },
): string {
  fs.mkdirSync(dir, { recursive: true });
  options.bundle(path.join(dir, 'bridge.json'));
  const file = path.join(dir, 'gateway.yaml');
  fs.writeFileSync(
    file,
    YAML.stringify({
      gateway: {
        id: options.gatewayId ?? 'gw-test',
        data_dir: './data',
        log_level: 'debug',
        status_interval_s: 3600,
      },
      // Any free port: tests run side by side.
      status_page: { host: '127.0.0.1', port: 0, ...options.statusPage },
      uplink: {
        bundle: './bridge.json',
        reconnect_min_ms: 50,
        reconnect_max_ms: 400,
        connect_timeout_ms: 5000,
        ...options.uplink,
      },
      ...(options.buffer ? { buffer: options.buffer } : {}),
      collectors: options.collectors ?? {},
    }),
  );
  return file;
}

/** A gateway in this process from a configuration file, with its log lines captured. */
export async function startTestGateway(configFile: string): Promise<TestGateway> {
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const config = loadConfig(configFile);
  const gateway = new Gateway({ config, log: createLogger('debug', sink) });
  await gateway.start();
  return { gateway, dir: path.dirname(configFile), configFile, logs, stop: () => gateway.stop() };
}

export { tempDir };

/** The bundle of the local bridge stand-in: the test PKI and its URL. */
export function localBundle(pki: TestPki, bridgeUrl: string): (file: string) => void {
  return (file) => writeBundle(file, pki, bridgeUrl);
}

/** Resolves once `predicate` holds, checking whenever the gateway logs a line or every 20 ms. */
export async function until(predicate: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const start = Date.now();
  while (!predicate()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A collector's memory that keeps nothing, for collectors that learn nothing worth keeping. */
export const noMemory: CollectorMemory = { recall: () => new Map(), remember: () => undefined };
