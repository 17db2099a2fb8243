import { killCloud, prepareInstallation, startCloud, stopCloud, type CloudRun } from './installation.ts';
import { Load } from './load.ts';
import { startPostgresServer } from './postgres-server.ts';
import { random, result, sleep } from './result.ts';
import type { Scenario, ScenarioOptions, ScenarioResult } from './types.ts';

/** Rejects when the cloud process ends: it must ride out the outage without a restart. */
function diesWith(cloud: CloudRun): Promise<never> {
  return cloud.exited.then((code) => {
    throw new Error(`the cloud exited (${code}) during the database outage:\n${cloud.stderr()}`);
  });
}

/**
 * Scenario 3: the PostgreSQL server stopped (`pg_ctl stop -m fast`) and started again under HTTP and
 * MQTT ingest load, the cloud left running. While the database is down HTTP ingest must answer 503
 * `db_unavailable` with `Retry-After` (any other 5xx counts), and the bridge PUBACK 0x80 or 0x97 or
 * no PUBACK at all: a PUBACK 0x00 for a reading that is not stored shows as lost. Recovery: from the
 * server's start until a reading is acknowledged again, without restarting the cloud.
 */
export const pgOutage: Scenario = {
  name: 'pg-outage',
  description: 'PostgreSQL stopped and started under HTTP + MQTT ingest, the cloud not restarted',
  databases: ['postgres'],
  async run(options: ScenarioOptions): Promise<ScenarioResult> {
    const faults = options.faults ?? (options.full ? 20 : 2);
    const downMs = options.durationMs ?? (options.full ? 10_000 : 700);
    const rand = random(options.seed);
    const server = await startPostgresServer();
    let stopping: Promise<void> = Promise.resolve();
    let inst: Awaited<ReturnType<typeof prepareInstallation>> | null = null;
    let cloud: CloudRun | null = null;
    let load: Load | null = null;
    try {
      inst = await prepareInstallation({ db: 'postgres', httpDevices: 4, postgresUrl: server.url });
      const startedAt = performance.now();
      cloud = await startCloud(inst);
      const died = diesWith(cloud);
      died.catch(() => undefined);
      load = new Load(inst, { httpSenders: 4, mqttSenders: 4 });
      load.start();
      await Promise.race([load.acksMore(options.full ? 20 : 10), died]);
      const recoveries: number[] = [];
      let refusedWhileDown = 0;
      for (let i = 0; i < faults; i++) {
        await sleep(rand() * (options.full ? 1000 : 300));
        load.outage = true;
        stopping = server.stop();
        await Promise.race([stopping, died]);
        const before = refusals(load);
        // Down for at least `downMs`, and until the senders have been refused at least once.
        await sleep(downMs * (0.5 + rand() / 2));
        while (refusals(load) === before) await Promise.race([sleep(50), died]);
        refusedWhileDown += refusals(load) - before;
        const acked = load.nextAck();
        await Promise.race([server.start(), died]);
        const startedDb = performance.now();
        // pg_ctl notices the server is up a little after it is: an earlier acknowledgement counts as 0.
        recoveries.push(Math.max(0, (await Promise.race([acked, died])) - startedDb));
        await Promise.race([load.acksMore(options.full ? 8 : 4), died]);
        load.outage = false;
        options.log(
          `outage ${i + 1}/${faults}: acknowledging again ${Math.round(recoveries.at(-1)!)} ms after the start`,
        );
      }
      await Promise.race([load.acksMore(options.full ? 20 : 10), died]);
      await load.stop();
      const outcome = await result(this.name, options, inst, load, {
        faults,
        startedAt,
        recoveryMs: Math.max(0, ...recoveries),
        notes: {
          'refused while down': refusedWhileDown,
          'error log lines': cloud.errors.count,
        },
      });
      const code = await stopCloud(cloud);
      if (code !== 0) outcome.notes.failed = `the cloud did not stop cleanly after the outages: exit ${code}`;
      return outcome;
    } finally {
      await load?.stop();
      if (cloud) await killCloud(cloud);
      await stopping.catch(() => undefined);
      await server.start().catch(() => undefined); // up again for the database to be dropped
      await inst?.dispose();
      await server.dispose();
    }
  },
};

/** Answers that refused a reading for the outage: 503s, PUBACK 0x80/0x97, and PUBACKs withheld. */
function refusals(load: Load): number {
  const a = load.tally.answers;
  return (a['503'] ?? 0) + (a['puback 0x80'] ?? 0) + (a['puback 0x97'] ?? 0) + (a['puback timeout'] ?? 0);
}
