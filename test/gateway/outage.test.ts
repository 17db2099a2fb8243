import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import type { ShellyHttpCollector } from '../../gateway/src/collectors/shelly-http/shelly-http.collector.ts';
import { ShellyHtGen1Emulator } from '../../hardware/emulators/shelly-ht-gen1.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../helpers/cloud.ts';
import { eventually } from '../helpers/eventually.ts';
import { createSite } from '../helpers/fixtures.ts';
import { createBridge } from '../helpers/mqtt.ts';
import { channelPoints, saveBundle } from './helpers/cloud-reads.ts';
import { startTestGateway, tempDir, until, writeGatewayConfig, type TestGateway } from './helpers/gateway.ts';

/**
 * The outage test: the cloud is stopped while devices keep reporting to the gateway, then comes
 * back on the same address and database. Every reading the gateway accepted arrives exactly once
 * (no loss, no duplicate rows), in order per channel, at the time it was taken.
 */
let first: TestCloud;
let second: TestCloud | null = null;
let user: SignedIn;
let siteId: string;
let gw: TestGateway;
let dir: string;

beforeAll(async () => {
  first = await startTestCloud({ mqtt: true, env: { RATE_LIMIT_MODE: 'warn' } });
  user = await signUp(first, 'outage@example.com');
  siteId = (await createSite(first, user.token)).id;
  const bundle = await createBridge(first, user.token, siteId);
  dir = tempDir('gw-outage-');
  const file = writeGatewayConfig(dir, {
    bundle: (f) => saveBundle(f, first, bundle),
    collectors: { shelly_http: { host: '127.0.0.1', port: 0 } },
    uplink: { inflight: 20 },
  });
  gw = await startTestGateway(file);
}, 60_000);

afterAll(async () => {
  await gw?.stop();
  await second?.stop();
  await first?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('cloud outage', () => {
  it('delivers every accepted reading exactly once and in order after the cloud comes back', async () => {
    const http = gw.gateway.collector<ShellyHttpCollector>('shelly-http');
    const devices = ['shellyht-A1', 'shellyht-B2'].map(
      (id) => new ShellyHtGen1Emulator({ url: `http://127.0.0.1:${http.port}/`, id }),
    );
    let n = 0;
    const sent: Record<string, number[]> = { 'shellyht-A1': [], 'shellyht-B2': [] };
    const reportRound = async () => {
      n++;
      for (const d of devices) {
        const value = Math.round(n * 10 + (d === devices[0] ? 0 : 5)) / 100;
        expect(await d.report({ temperature: value, humidity: 50 })).toBe(200);
        sent[d === devices[0] ? 'shellyht-A1' : 'shellyht-B2']!.push(value);
      }
    };

    for (let i = 0; i < 30; i++) await reportRound();
    // Stop the cloud while the uplink is still busy: some PUBACKs are lost on the way.
    const mqttPort = first.cloud.mqttPort;
    await first.cloud.stop();
    await until(
      () => gw.gateway.status.snapshot().uplink.state !== 'connected',
      'the uplink to notice the outage',
    );
    for (let i = 0; i < 40; i++) await reportRound();
    const backlog = gw.gateway.status.snapshot().buffer;
    expect(backlog.depth).toBeGreaterThanOrEqual(80);
    expect(backlog.oldestAgeSeconds).not.toBeNull();

    second = await startTestCloud({
      sameDatabaseAs: first,
      env: { MQTT_PORT: String(mqttPort), RATE_LIMIT_MODE: 'warn' },
    });
    // New readings keep flowing while the backlog drains.
    for (let i = 0; i < 30; i++) await reportRound();
    await until(() => gw.gateway.status.snapshot().buffer.depth === 0, 'the backlog to drain', 30_000);

    for (const [device, values] of Object.entries(sent)) {
      const temps = await eventually(async () => {
        const p = await channelPoints(second!, user.token, siteId, device, 'temperature');
        return p.length >= values.length ? p : null;
      }, `${device}'s ${values.length} temperatures`);
      expect(temps.map((p) => p.value)).toEqual(values);
      const times = temps.map((p) => p.ts);
      expect(new Set(times).size).toBe(times.length);
      expect([...times].sort()).toEqual(times);
      expect((await channelPoints(second, user.token, siteId, device, 'humidity')).length).toBe(
        values.length,
      );
    }
    expect(gw.gateway.status.snapshot().uplink.connects).toBeGreaterThanOrEqual(2);
  }, 90_000);
});
