import { killCloud, prepareInstallation, startCloud, stopCloud } from './installation.ts';
import { Load } from './load.ts';
import { random, result, sleep } from './result.ts';
import type { Scenario, ScenarioOptions, ScenarioResult } from './types.ts';

/** How long after a kill the first acknowledgement may take, the new process's start included. */
const RESTART_ACK_TIMEOUT_MS = 600_000;

/**
 * Scenario 2: the cloud SIGKILLed at random moments under HTTP and MQTT ingest load and started again
 * on the same data. Every reading answered 200 or PUBACK 0x00 must be stored once; the senders send
 * unanswered readings again, so a reading committed just before a kill comes back and must be
 * deduplicated. Recovery: from the kill until a reading is acknowledged again (the restart included).
 */
export const cloudKill: Scenario = {
  name: 'cloud-kill',
  description: 'cloud SIGKILLed at random under HTTP + MQTT ingest, restarted on the same data',
  async run(options: ScenarioOptions): Promise<ScenarioResult> {
    const faults = options.faults ?? (options.full ? 100 : 2);
    // Load between kills: a random time up to this, after the first acknowledgement of the new process.
    const maxUpMs = options.durationMs ?? (options.full ? 3000 : 300);
    const rand = random(options.seed);
    const inst = await prepareInstallation({ db: options.db, httpDevices: 4 });
    const startedAt = performance.now();
    let cloud = await startCloud(inst);
    const load = new Load(inst, { httpSenders: 4, mqttSenders: 4 });
    const recoveries: number[] = [];
    let errorLines = 0;
    try {
      load.start();
      await load.acksMore(options.full ? 20 : 10);
      for (let i = 0; i < faults; i++) {
        await sleep(rand() * maxUpMs);
        await killCloud(cloud);
        errorLines += cloud.errors.count;
        const killedAt = performance.now();
        // Armed before the restart (an answer may come before the parent reads the "listening"
        // line), so its bound covers the restart, which takes minutes on a saturated machine.
        const acked = load.nextAck(RESTART_ACK_TIMEOUT_MS);
        cloud = await startCloud(inst);
        recoveries.push((await acked) - killedAt);
        options.log(
          `kill ${i + 1}/${faults}: acknowledging again after ${Math.round(recoveries.at(-1)!)} ms`,
        );
        await load.acksMore(options.full ? 8 : 4);
      }
      await load.acksMore(options.full ? 20 : 10);
      await load.stop();
      const figures = {
        faults,
        startedAt,
        recoveryMs: Math.max(0, ...recoveries),
        notes: {
          'mean recovery ms': Math.round(
            recoveries.reduce((a, b) => a + b, 0) / Math.max(1, recoveries.length),
          ),
          'error log lines': errorLines + cloud.errors.count,
        } as ScenarioResult['notes'],
      };
      const outcome = await result(this.name, options, inst, load, figures);
      const code = await stopCloud(cloud);
      if (code !== 0) outcome.notes['clean stop'] = `exit ${code}`;
      for (const [i, line] of cloud.errors.first.slice(0, 3).entries())
        outcome.notes[`error log ${i + 1}`] = line;
      return outcome;
    } finally {
      await load.stop();
      await killCloud(cloud);
      await inst.dispose();
    }
  },
};
