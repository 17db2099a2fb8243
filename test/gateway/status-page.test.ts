import { afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { ShellyHttpCollector } from '../../gateway/src/collectors/shelly-http/shelly-http.collector.ts';
import { ShellyHtGen1Emulator } from '../../hardware/emulators/shelly-ht-gen1.ts';
import { LocalBridge } from './helpers/bridge.ts';
import { localBundle, startTestGateway, tempDir, until, writeGatewayConfig } from './helpers/gateway.ts';
import { makePki, type TestPki } from './helpers/pki.ts';

/**
 * The LAN status page of a running gateway, read over HTTP as an installer's phone would: the
 * uplink, the buffer, the collectors and the last readings on one self-contained page.
 */
let pki: TestPki;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(() => {
  pki = makePki(tempDir('gw-pki-'));
});

afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function gatewayWithPage(options: { bridgeUp: boolean; statusPage?: Record<string, unknown> }) {
  const bridge = new LocalBridge(pki);
  if (options.bridgeUp) {
    await bridge.start();
    cleanups.push(() => bridge.stop());
  }
  const file = writeGatewayConfig(tempDir('gw-status-'), {
    bundle: localBundle(pki, options.bridgeUp ? bridge.url : 'mqtts://127.0.0.1:1'),
    gatewayId: 'gw-cellar',
    collectors: { shelly_http: { host: '127.0.0.1', port: 0 } },
    ...(options.statusPage ? { statusPage: options.statusPage } : {}),
  });
  const gw = await startTestGateway(file);
  cleanups.push(() => gw.stop());
  return { gw, bridge };
}

describe('status page', () => {
  it('shows the uplink, the buffer, the collectors and the last readings, with no external asset', async () => {
    const { gw } = await gatewayWithPage({ bridgeUp: true });
    await until(() => gw.gateway.status.snapshot().uplink.state === 'connected', 'the uplink');
    const port = gw.gateway.statusPage!.port!;
    expect(gw.logs.find((l) => l.msg === 'gateway started')?.statusPort).toBe(port);

    const http = gw.gateway.collector<ShellyHttpCollector>('shelly-http');
    const shelly = new ShellyHtGen1Emulator({ url: `http://127.0.0.1:${http.port}/`, id: 'shellyht-C0FFEE' });
    expect(await shelly.report({ temperature: 3.5, humidity: 61 })).toBe(200);

    const res = await fetch(`http://127.0.0.1:${port}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    const html = await res.text();
    expect(html).toContain('<h1>Gateway gw-cellar</h1>');
    expect(html).toMatch(/id="uplink-state" class="ok">connected to the cloud/);
    expect(html).toMatch(
      /<th scope="row">shelly-http<\/th><td>listening<\/td><td class="n">1<\/td><td class="n">1<\/td>/,
    );
    expect(html).toContain('<td>shellyht-C0FFEE</td>');
    expect(html).toContain('temperature 3.5 °C, humidity 61 %');
    // Self-contained: nothing to fetch from anywhere.
    expect(html).not.toMatch(/<script|<link|<img|src=|href=|url\(/i);

    const json = (await (await fetch(`http://127.0.0.1:${port}/status.json`)).json()) as {
      recent: { device: string }[];
      collectors: Record<string, { accepted: number }>;
    };
    expect(json.recent.map((r) => r.device)).toEqual(['shellyht-C0FFEE']);
    expect(json.collectors['shelly-http']!.accepted).toBe(1);

    expect((await fetch(`http://127.0.0.1:${port}/`, { method: 'POST' })).status).toBe(405);
    expect((await fetch(`http://127.0.0.1:${port}/nope`)).status).toBe(404);
  });

  it('shows a backlog when the cloud is unreachable', async () => {
    const { gw } = await gatewayWithPage({ bridgeUp: false });
    const http = gw.gateway.collector<ShellyHttpCollector>('shelly-http');
    const shelly = new ShellyHtGen1Emulator({ url: `http://127.0.0.1:${http.port}/`, id: 'shellyht-B4CC' });
    for (const temp of [4, 4.5]) expect(await shelly.report({ temperature: temp, humidity: 50 })).toBe(200);
    await until(() => gw.gateway.status.snapshot().uplink.state === 'waiting', 'the uplink to back off');
    const html = await (await fetch(`http://127.0.0.1:${gw.gateway.statusPage!.port}/`)).text();
    expect(html).toMatch(/id="uplink-state" class="bad">cloud unreachable: retrying/);
    // The device's info and two readings wait in the buffer.
    expect(html).toMatch(/id="buffer-depth">3 of 5000000 readings/);
  });

  it('a taken port is logged and the gateway runs on without the page; it can be turned off', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve()));
    cleanups.push(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
    const taken = (blocker.address() as AddressInfo).port;
    const { gw } = await gatewayWithPage({ bridgeUp: false, statusPage: { port: taken } });
    expect(gw.gateway.statusPage!.port).toBeNull();
    expect(gw.logs.some((l) => l.msg === 'status page not available: cannot listen')).toBe(true);
    expect(gw.gateway.collector<ShellyHttpCollector>('shelly-http').port).toBeGreaterThan(0);

    const off = await gatewayWithPage({ bridgeUp: false, statusPage: { enabled: false } });
    expect(off.gw.gateway.statusPage).toBeNull();
  });
});
