import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import { ShellyHtGen1Emulator } from '../../hardware/emulators/shelly-ht-gen1.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../helpers/cloud.ts';
import { eventually } from '../helpers/eventually.ts';
import { createSite } from '../helpers/fixtures.ts';
import { createBridge } from '../helpers/mqtt.ts';
import { channelPoints, saveBundle } from './helpers/cloud-reads.ts';
import { tempDir, writeGatewayConfig } from './helpers/gateway.ts';
import { spawnGateway, type GatewayProcess } from './helpers/process.ts';

/**
 * The power-loss test: the gateway process (started as `npm run gateway` starts it) is killed with
 * SIGKILL while readings flow, with and without a backlog; after a restart, every reading a device
 * was told "accepted" (HTTP 200) is in the cloud.
 */
let first: TestCloud;
let second: TestCloud | null = null;
let user: SignedIn;
let siteId: string;
let dir: string;
let configFile: string;
let gateway: GatewayProcess | null = null;

beforeAll(async () => {
  first = await startTestCloud({ mqtt: true, env: { RATE_LIMIT_MODE: 'warn' } });
  user = await signUp(first, 'power@example.com');
  siteId = (await createSite(first, user.token)).id;
  const bundle = await createBridge(first, user.token, siteId);
  dir = tempDir('gw-power-');
  configFile = writeGatewayConfig(dir, {
    bundle: (f) => saveBundle(f, first, bundle),
    collectors: { shelly_http: { host: '127.0.0.1', port: 0 } },
  });
}, 60_000);

afterAll(async () => {
  if (gateway) await gateway.kill('SIGTERM');
  await second?.stop();
  await first?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/**
 * Reports as fast as answers come, pushing each value answered 200 into `accepted`, until the
 * gateway stops answering (it was killed).
 */
async function reportUntilGone(
  gw: GatewayProcess,
  id: string,
  start: number,
  accepted: number[],
): Promise<void> {
  const device = new ShellyHtGen1Emulator({ url: `http://127.0.0.1:${gw.shellyHttpPort}/`, id });
  for (let i = start; ; i++) {
    const value = i / 100;
    const status = await device.report({ temperature: value, humidity: 50 });
    if (status === 200) accepted.push(value);
    else if (status === 0)
      return; // the connection failed: the gateway is gone
    else throw new Error(`report ${value} answered ${status}`);
  }
}

describe('power loss', () => {
  it('SIGKILL while readings flow loses nothing that was accepted, with the cloud up and with a backlog', async () => {
    // 1. Cloud up: the gateway is killed in the middle of a stream of reports.
    const gw1 = (gateway = await spawnGateway(configFile));
    const accepted1: number[] = [];
    const flow1 = reportUntilGone(gw1, 'shellyht-P1', 1, accepted1);
    await eventually(
      async () => (await channelPoints(first, user.token, siteId, 'shellyht-P1', 'temperature')).length >= 20,
      '20 readings in the cloud',
    );
    expect(await gw1.kill('SIGKILL')).toBe('SIGKILL');
    await flow1;

    // 2. Restart; the cloud goes away, a backlog builds, and the gateway is killed again.
    const gw2 = (gateway = await spawnGateway(configFile));
    const mqttPort = first.cloud.mqttPort;
    await first.cloud.stop();
    await eventually(
      () => gw2.logs.some((l) => l.msg === 'uplink down: reconnecting after backoff'),
      'the outage',
    );
    const accepted2: number[] = [];
    const flow2 = reportUntilGone(gw2, 'shellyht-P1', 5_000, accepted2);
    await eventually(() => accepted2.length >= 40, '40 readings accepted during the outage');
    expect(await gw2.kill('SIGKILL')).toBe('SIGKILL');
    await flow2;

    // 3. The cloud and the gateway come back: every accepted reading arrives, once.
    second = await startTestCloud({
      sameDatabaseAs: first,
      env: { MQTT_PORT: String(mqttPort), RATE_LIMIT_MODE: 'warn' },
    });
    gateway = await spawnGateway(configFile);
    const expected = [...accepted1, ...accepted2];
    const stored = await eventually(
      async () => {
        const p = await channelPoints(second!, user.token, siteId, 'shellyht-P1', 'temperature');
        const values = new Set(p.map((x) => x.value));
        return expected.every((v) => values.has(v)) ? p : null;
      },
      `all ${expected.length} accepted readings in the cloud`,
      30_000,
    );
    const times = stored.map((p) => p.ts);
    expect(new Set(times).size).toBe(times.length);
    expect(new Set(stored.map((p) => p.value)).size).toBe(stored.length);
  }, 120_000);
});
