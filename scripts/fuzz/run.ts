import { closeClient, connectBridge, publish } from '../../test/helpers/mqtt.ts';
import type { DbKind } from '../../test/helpers/databases.ts';
import { formatTable, fuzzHttp, newTally, type Tally } from './http-fuzz.ts';
import { fuzzMqtt } from './mqtt-fuzz.ts';
import { startFuzzWorld, type FuzzWorld } from './world.ts';

export interface FuzzReport {
  db: DbKind;
  tally: Tally;
  table: string;
  mqttPackets: number;
  unhandled: string[];
  /** Log lines at error level or above (a 5xx, a failed sweep). */
  errorLogs: Record<string, unknown>[];
  /** After the run: the HTTP API and the bridge still answer a valid request. */
  alive: boolean;
  seconds: number;
}

/** After the run the same process answers a valid read and a valid MQTT reading. */
async function stillAlive(world: FuzzWorld): Promise<boolean> {
  const openapi = await world.t.http.get('/v1/openapi.json');
  const sites = await world.t.http.get('/v1/sites', { token: world.adminToken });
  const client = await connectBridge(world.t, world.bridge);
  try {
    const ack = await publish(client, `${world.topicRoot}/alive`, {
      measurements: [{ type: 'temperature', value: 4 }],
    });
    const alive = openapi.status === 200 && sites.status === 200 && ack.reasonCode === 0;
    if (!alive)
      console.log(
        `not alive: openapi ${openapi.status}, sites ${sites.status}, puback ${ack.reasonCode} ${ack.reasonString ?? ''}`,
      );
    return alive;
  } finally {
    await closeClient(client);
  }
}

/** One fuzz run against a fresh cloud: HTTP (and the protobuf webhook), then MQTT, then liveness. */
export async function runFuzz(options: {
  db: DbKind;
  requests: number;
  mqttSessions: number;
  seed: number;
}): Promise<FuzzReport> {
  const started = performance.now();
  const unhandled: string[] = [];
  // The world first: a failure to make it is the run's own error, not one of the process under test.
  const world = await startFuzzWorld(options.db);
  const onRejection = (reason: unknown) => unhandled.push(String((reason as Error)?.stack ?? reason));
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onRejection);
  const tally = newTally();
  try {
    await fuzzHttp(world, tally, { requests: options.requests, seed: options.seed });
    const mqttPackets = await fuzzMqtt(world, tally, { sessions: options.mqttSessions, seed: options.seed });
    const alive = await stillAlive(world);
    return {
      db: options.db,
      tally,
      table: formatTable(tally),
      mqttPackets,
      unhandled,
      errorLogs: world.t.logs.filter((l) => Number(l.level) >= 50),
      alive,
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    await world.t.stop();
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onRejection);
  }
}
