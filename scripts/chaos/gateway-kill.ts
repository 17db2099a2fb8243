import fs from 'node:fs';
import path from 'node:path';
import { ShellyHtGen1Emulator } from '../../hardware/emulators/shelly-ht-gen1.ts';
import { buildGateway } from '../build-gateway.ts';
import { spawnGateway, type GatewayProcess } from '../../test/gateway/helpers/process.ts';
import { writeGatewayConfig } from '../../test/gateway/helpers/gateway.ts';
import { tempDir } from '../../test/helpers/databases.ts';
import { check } from './checker.ts';
import { ChirpstackDevices, gatewayBuffer, SerialDevices } from './gateway-devices.ts';
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
const SERIALS = 2;
const CHIRPSTACKS = 2;
/** A serial line and a LoRaWAN uplink per device every this many ms (a Shelly sends as fast as answered). */
const STEADY_MS = 100;

/**
 * Scenario 1: the gateway (its production build, `node gateway.mjs --config FILE`, as the Pi runs it)
 * SIGKILLed at random moments while emulated devices of the three kinds send to it, and while its
 * uplink drains a backlog: the cloud is down for the first seconds, so readings pile up in the
 * gateway's buffer. Every reading the gateway accepted must reach the cloud once. What "accepted"
 * means depends on the device:
 * - Shelly H&T (HTTP, as fast as the gateway answers): the gateway answered 200, and the device will
 *   not send it again. A Shelly reading carries no time (the gateway stamps it), so readings are
 *   told apart by value: each device reports -40 + n/1000 °C for its n-th report.
 * - serial sensors (a line every 100 ms on a pseudo-terminal) and ChirpStack uplinks (every 100 ms
 *   through an MQTT broker): see `SerialDevices` and `ChirpstackDevices` (gateway-devices.ts).
 * Recovery: from the kill until the restarted gateway accepts a Shelly reading again. When the faults
 * are over the scenario waits for the gateway's buffer to empty (while it shrinks), then checks.
 *
 * The cloud's database plays no part in the gateway's durability; the scenario runs on SQLite only.
 */
export const gatewayKill: Scenario = {
  name: 'gateway-kill',
  description:
    'gateway SIGKILLed at random while Shelly, serial and ChirpStack devices send and its uplink drains a backlog',
  databases: ['sqlite'],
  async run(options: ScenarioOptions): Promise<ScenarioResult> {
    const faults = options.faults ?? (options.full ? 1000 : 2);
    const maxUpMs = options.durationMs ?? (options.full ? 2000 : 300);
    const rand = random(options.seed);
    const inst = await prepareInstallation({ db: options.db, httpDevices: 0 });
    const dir = tempDir('sm-chaos-gw-');
    const shellyPort = await freePort();
    const statusPort = await freePort();
    const statusUrl = `http://127.0.0.1:${statusPort}/status.json`;
    const ledger = new Map<string, boolean>();
    const serials = new SerialDevices({
      dir,
      count: SERIALS,
      ledger,
      statusUrl,
      intervalMs: STEADY_MS,
      watchMs: 5000,
    });
    const chirpstacks = new ChirpstackDevices({
      count: CHIRPSTACKS,
      ledger,
      gatewayClientId: 'gw-chaos-chirpstack',
      intervalMs: STEADY_MS,
    });
    const startedAt = performance.now();
    let cloud: CloudRun | null = null;
    let gateway: GatewayProcess | null = null;
    const answers: Record<string, number> = {};
    let acks = 0;
    let stopping = false;
    const senders: Promise<void>[] = [];
    try {
      const { bundle } = await buildGateway({ outdir: path.join(dir, 'app'), quiet: true });
      await serials.plug();
      await chirpstacks.serve();
      const configFile = writeGatewayConfig(path.join(dir, 'etc'), {
        bundle: (file) => fs.writeFileSync(file, JSON.stringify({ ...inst.bridge, mqtt_url: inst.mqttUrl })),
        collectors: {
          shelly_http: { host: '127.0.0.1', port: shellyPort },
          serial: serials.config(),
          chirpstack: chirpstacks.config(),
        },
        uplink: { inflight: 20 },
        statusPage: { port: statusPort },
        gatewayId: 'gw-chaos',
      });
      // The backlog: readings accepted while the cloud is not there yet.
      gateway = await spawnGateway(configFile, { bundle });
      serials.start();
      chirpstacks.start();
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
        gateway = await spawnGateway(configFile, { bundle });
        await acksAtLeast(before + 1);
        recoveries.push(performance.now() - killedAt);
        options.log(
          `gateway kill ${i + 1}/${faults}: accepting again after ${Math.round(recoveries.at(-1)!)} ms`,
        );
      }
      stopping = true;
      await Promise.all(senders);
      await serials.stop();
      // The broker stays: the gateway drains the uplinks queued in its session.
      await chirpstacks.stopSending();
      // The backlog drains: the scenario waits until the gateway's buffer is empty (its status
      // page: no row waiting for the cloud's PUBACK, none in flight), for as long as it keeps
      // shrinking (two minutes without progress end the wait). The ledger is copied before each
      // look: a reading the gateway accepted before its buffer was seen empty has reached the cloud.
      const drainStart = performance.now();
      let settled: [string, boolean][] = [];
      let smallest = Infinity;
      let progressAt = performance.now();
      for (;;) {
        settled = [...ledger];
        const buffer = await gatewayBuffer(statusUrl);
        if (buffer && buffer.depth === 0 && buffer.inflight === 0) break;
        if (buffer && buffer.depth < smallest) {
          smallest = buffer.depth;
          progressAt = performance.now();
        }
        if (performance.now() - progressAt > 120_000) break;
        await sleep(500);
      }
      const drainMs = performance.now() - drainStart;
      // Only temperatures: humidity (50 in every report) is not what readings are told apart by.
      // Shelly and serial readings are keyed by value, ChirpStack ones by their time.
      const byValue = (await storedKeys(inst, 'value')).filter(
        (k) => k.includes('/temperature/') && !k.startsWith('a84041'),
      );
      const byTime = (await storedKeys(inst, 'ts')).filter(
        (k) => k.includes('/temperature/') && k.startsWith('a84041'),
      );
      const checked = check(
        settled.map(([key, acknowledged]) => ({ key, acknowledged })),
        [...byValue, ...byTime],
      );
      const notes: ScenarioResult['notes'] = {
        'mean recovery ms': Math.round(
          recoveries.reduce((a, b) => a + b, 0) / Math.max(1, recoveries.length),
        ),
        'buffer empty after the last kill, ms': Math.round(drainMs),
        'cloud error log lines': cloud.errors.count,
        'serial lines written': serials.written,
        'serial lines seen buffered': serials.confirmed,
        'ChirpStack uplinks published': chirpstacks.published,
        'ChirpStack deliveries the gateway PUBACKed': chirpstacks.gatewayAcks,
      };
      for (const kind of ['shellyht-', 'serial-', 'a84041']) {
        const of = [...ledger].filter(([k]) => k.startsWith(kind));
        notes[`${kind.replace(/-$/, '')} sent/accepted`] = `${of.length}/${of.filter(([, ok]) => ok).length}`;
      }
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
      await serials.stop();
      await chirpstacks.stop();
      if (gateway) await gateway.kill('SIGKILL');
      if (cloud) await killCloud(cloud);
      fs.rmSync(path.resolve(dir), { recursive: true, force: true });
      await inst.dispose();
    }
  },
};
