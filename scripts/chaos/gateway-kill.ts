import fs from 'node:fs';
import path from 'node:path';
import { ShellyHtGen1Emulator } from '../../hardware/emulators/shelly-ht-gen1.ts';
import { spawnGateway, type GatewayProcess } from '../../test/gateway/helpers/process.ts';
import { writeGatewayConfig } from '../../test/gateway/helpers/gateway.ts';
import { tempDir } from '../../test/helpers/databases.ts';
import { check } from './checker.ts';
import {
  freePort,
  killCloud,
  prepareInstallation,
  startCloud,
  stopCloud,
  storedKeys,
  type CloudRun,
} from './installation.ts';
import { random, sleep } from './result.ts';
import { readingKey, type Scenario, type ScenarioOptions, type ScenarioResult } from './types.ts';

const SHELLYS = 4;

/**
 * Scenario 1: the gateway (as `npm run gateway` starts it) SIGKILLed at random moments while emulated
 * Shelly H&T devices report to it as fast as it answers, and while its uplink drains a backlog: the
 * cloud is down for the first seconds, so readings pile up in the gateway's buffer. A reading the
 * gateway answered 200 ("accepted", the device will not send it again) must reach the cloud once.
 * A Shelly reading carries no time (the gateway stamps it), so readings are told apart by value: each
 * device reports -40 + n/1000 °C for its n-th report. Recovery: from the kill until the restarted
 * gateway accepts a reading again. When the faults are over the scenario waits (up to two minutes)
 * for the backlog to drain, then checks.
 *
 * The cloud's database plays no part in the gateway's durability; the scenario runs on SQLite only.
 */
export const gatewayKill: Scenario = {
  name: 'gateway-kill',
  description: 'gateway SIGKILLed at random while Shelly devices report and its uplink drains a backlog',
  databases: ['sqlite'],
  async run(options: ScenarioOptions): Promise<ScenarioResult> {
    const faults = options.faults ?? (options.full ? 1000 : 2);
    const maxUpMs = options.durationMs ?? (options.full ? 2000 : 300);
    const rand = random(options.seed);
    const inst = await prepareInstallation({ db: options.db, httpDevices: 0 });
    const dir = tempDir('sm-chaos-gw-');
    const shellyPort = await freePort();
    const configFile = writeGatewayConfig(dir, {
      bundle: (file) => fs.writeFileSync(file, JSON.stringify({ ...inst.bridge, mqtt_url: inst.mqttUrl })),
      collectors: { shelly_http: { host: '127.0.0.1', port: shellyPort } },
      uplink: { inflight: 20 },
      gatewayId: 'gw-chaos',
    });
    const startedAt = performance.now();
    let cloud: CloudRun | null = null;
    let gateway: GatewayProcess | null = null;
    const ledger = new Map<string, boolean>();
    const answers: Record<string, number> = {};
    let acks = 0;
    let stopping = false;
    const senders: Promise<void>[] = [];
    try {
      // The backlog: readings accepted while the cloud is not there yet.
      gateway = await spawnGateway(configFile);
      for (let s = 0; s < SHELLYS; s++) {
        const localId = `shellyht-C${s}`;
        const device = new ShellyHtGen1Emulator({ url: `http://127.0.0.1:${shellyPort}/`, id: localId });
        senders.push(
          (async () => {
            for (let n = 1; !stopping; n++) {
              const value = Number((-40 + n / 1000).toFixed(3));
              const key = readingKey(localId, 'temperature', value);
              const status = await device.report({ temperature: value, humidity: 50 });
              answers[String(status)] = (answers[String(status)] ?? 0) + 1;
              device.sent.length = 0;
              ledger.set(key, status === 200);
              if (status === 200) acks++;
              // A real H&T tries again at its next wake-up, with a new reading: so does this one.
              else await sleep(50);
            }
          })(),
        );
      }
      const acksAtLeast = async (n: number) => {
        const deadline = performance.now() + 120_000;
        while (acks < n) {
          if (performance.now() > deadline) throw new Error('the gateway accepts no reading');
          await sleep(20);
        }
      };
      await acksAtLeast(options.full ? 400 : 50);
      cloud = await startCloud(inst);
      const recoveries: number[] = [];
      for (let i = 0; i < faults; i++) {
        await sleep(rand() * maxUpMs);
        await gateway.kill('SIGKILL');
        const killedAt = performance.now();
        const before = acks;
        gateway = await spawnGateway(configFile);
        await acksAtLeast(before + 1);
        recoveries.push(performance.now() - killedAt);
        options.log(
          `gateway kill ${i + 1}/${faults}: accepting again after ${Math.round(recoveries.at(-1)!)} ms`,
        );
      }
      stopping = true;
      await Promise.all(senders);
      // The backlog drains: every accepted reading reaches the cloud (or two minutes pass).
      const accepted = [...ledger].filter(([, ok]) => ok).map(([key]) => key);
      let stored: string[] = [];
      const deadline = performance.now() + 120_000;
      const drainStart = performance.now();
      for (;;) {
        // Humidity (50 in every report) is not what the readings are told apart by.
        stored = (await storedKeys(inst, 'value')).filter((k) => k.includes('/temperature/'));
        const have = new Set(stored);
        if (accepted.every((k) => have.has(k)) || performance.now() > deadline) break;
        await sleep(1000);
      }
      const drainMs = performance.now() - drainStart;
      const checked = check(
        [...ledger].map(([key, acknowledged]) => ({ key, acknowledged })),
        stored,
      );
      const notes: ScenarioResult['notes'] = {
        'mean recovery ms': Math.round(
          recoveries.reduce((a, b) => a + b, 0) / Math.max(1, recoveries.length),
        ),
        'backlog drained after the last kill, ms': Math.round(drainMs),
        'cloud error log lines': cloud.errors.count,
      };
      for (const [what, n] of Object.entries(answers).sort()) notes[what === '0' ? 'no answer' : what] = n;
      const refused = Object.entries(answers).filter(([s]) => s !== '200' && s !== '0');
      if (refused.length > 0) notes.failed = `the gateway refused readings: ${JSON.stringify(refused)}`;
      await gateway.kill('SIGTERM');
      gateway = null;
      const code = await stopCloud(cloud);
      if (code !== 0) notes.failed = `the cloud did not stop cleanly: exit ${code}`;
      return {
        scenario: this.name,
        db: options.db,
        faults,
        durationMs: Math.round(performance.now() - startedAt),
        sent: ledger.size,
        acknowledged: checked.acknowledged,
        stored: checked.stored,
        lost: checked.lost.length,
        duplicated: checked.duplicated.length,
        unexpected: checked.unexpected.length,
        http5xx: Object.entries(answers)
          .filter(([s]) => Number(s) >= 500)
          .reduce((n, [, count]) => n + count, 0),
        recoveryMs: Math.round(Math.max(0, ...recoveries)),
        examples: {
          lost: checked.lost.slice(0, 20),
          duplicated: checked.duplicated.slice(0, 20),
          unexpected: checked.unexpected.slice(0, 20),
        },
        notes,
      };
    } finally {
      stopping = true;
      await Promise.all(senders);
      if (gateway) await gateway.kill('SIGKILL');
      if (cloud) await killCloud(cloud);
      fs.rmSync(path.resolve(dir), { recursive: true, force: true });
      await inst.dispose();
    }
  },
};
