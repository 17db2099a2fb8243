import fs from 'node:fs';
import net from 'node:net';
import type { TestDatabase } from './databases.ts';
import { tempDir } from './databases.ts';
import { spawnCloud, type CloudProcess } from './process.ts';

/**
 * Replicas of one installation in processes of their own (as on separate machines): the test's
 * database, a data directory each, the MQTT bridge on a port of its own.
 */

/** A port free now on 127.0.0.1 (for listeners whose port must be known before they start). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The test database's URL for another process: on PostgreSQL with the test's schema as its search path. */
export function databaseUrlFor(database: TestDatabase): string {
  return database.schema
    ? `${database.url}?options=${encodeURIComponent(`-c search_path=${database.schema}`)}`
    : database.url;
}

export interface Replica extends CloudProcess {
  mqttPort: number;
  mqttUrl: string;
  dataDir: string;
  /** SIGTERM, then waits for the exit (a SIGKILLed replica is only waited for). */
  stop(): Promise<void>;
}

export async function spawnReplica(
  database: TestDatabase,
  env: Record<string, string> = {},
): Promise<Replica> {
  const dataDir = tempDir('sm-replica-');
  const mqttPort = await freePort();
  let started: CloudProcess;
  try {
    started = await spawnCloud({
      DATA_DIR: dataDir,
      DATABASE_URL: databaseUrlFor(database),
      MQTT_PORT: String(mqttPort),
      MQTT_HOST: '127.0.0.1',
      ...env,
    });
  } catch (err) {
    fs.rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  const port = Number(env.MQTT_PORT ?? mqttPort);
  return {
    ...started,
    mqttPort: port,
    mqttUrl: `mqtts://127.0.0.1:${port}`,
    dataDir,
    stop: async () => {
      if (started.child.exitCode === null && started.child.signalCode === null) started.child.kill('SIGTERM');
      await started.exited;
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
