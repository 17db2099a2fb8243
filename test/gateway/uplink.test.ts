import { afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import path from 'node:path';
import type { ShellyHttpCollector } from '../../gateway/src/collectors/shelly-http/shelly-http.collector.ts';
import { LocalBridge, type LocalBridgeOptions } from './helpers/bridge.ts';
import { localBundle, startTestGateway, tempDir, until, writeGatewayConfig } from './helpers/gateway.ts';
import { makePki, type TestPki } from './helpers/pki.ts';

/**
 * The uplink against a local stand-in of the cloud's bridge over real mutual TLS (aedes, MQTT 5):
 * what is published where, PUBACK-driven deletion, draining after an outage, refusals, downlinks.
 */
let pki: TestPki;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(() => {
  pki = makePki(tempDir('gw-pki-'));
});

afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function setUp(
  options: {
    refuse?: LocalBridgeOptions['refuse'];
    buffer?: Record<string, unknown>;
  } = {},
) {
  const bridge = new LocalBridge(pki, { refuse: options.refuse });
  await bridge.start();
  cleanups.push(() => bridge.stop());
  const dir = tempDir('gw-uplink-');
  const file = writeGatewayConfig(dir, {
    bundle: localBundle(pki, bridge.url),
    collectors: { shelly_http: { host: '127.0.0.1', port: 0 } },
    buffer: options.buffer,
  });
  const gw = await startTestGateway(file);
  cleanups.push(async () => {
    await gw.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const http = gw.gateway.collector<ShellyHttpCollector>('shelly-http');
  const report = (query: string) => fetch(`http://127.0.0.1:${http.port}/?${query}`);
  return { bridge, gw, report };
}

function root(): string {
  return `service/${pki.accountId}/`;
}

describe('uplink to the bridge', () => {
  it('publishes a reading to service/<account>/<device> once buffered, and deletes it on the PUBACK', async () => {
    const { bridge, gw, report } = await setUp();
    const answer = await report('hum=61&temp=4.25&id=shellyht-AA01');
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ accepted: 2 });
    await bridge.waitFor((m) => m.some((x) => x.topic === `${root()}shellyht-AA01`), 'the reading');
    const message = bridge.readings().find((m) => m.topic === `${root()}shellyht-AA01`)!;
    expect(message.qos).toBe(1);
    expect(message.retain).toBe(false);
    expect(message.body.measurements).toEqual([
      { type: 'temperature', value: 4.25 },
      { type: 'humidity', value: 61 },
    ]);
    expect(message.body.ts).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(message.body.device).toBeUndefined();
    await until(() => gw.gateway.status.snapshot().buffer.depth === 0, 'the buffer to empty');
    expect(gw.gateway.status.snapshot().uplink.published).toBeGreaterThanOrEqual(1);
  });

  it('keeps sending after the buffer ran empty (queue ids never restart)', async () => {
    const { bridge, gw, report } = await setUp();
    expect((await report('temp=1&id=shellyht-EMPTY')).status).toBe(200);
    await bridge.waitFor(() => bridge.readings().length === 1, 'the first reading');
    await until(() => gw.gateway.status.snapshot().buffer.depth === 0, 'the buffer to empty');
    gw.gateway.queue.flushDeletes();
    expect((await report('temp=2&id=shellyht-EMPTY')).status).toBe(200);
    await bridge.waitFor(() => bridge.readings().length === 2, 'the second reading');
  });

  it('announces the gateway: retained online state and info on connect, offline as its will', async () => {
    const { bridge } = await setUp();
    await bridge.waitFor((m) => m.some((x) => x.topic === `${root()}gw-test/info`), 'the gateway info');
    const online = bridge.messages.find((m) => m.topic === `${root()}gw-test/lwt`)!;
    expect(online).toMatchObject({ retain: true, qos: 1, body: { status: 'online' } });
    expect(online.body.at).toMatch(/Z$/);
    const info = bridge.messages.find((m) => m.topic === `${root()}gw-test/info`)!;
    expect(info).toMatchObject({ retain: true, body: { model: 'gateway-pi' } });
    expect(bridge.connects[0]).toEqual({
      clientId: 'gw-test',
      version: 5,
      willTopic: `${root()}gw-test/lwt`,
    });
  });

  it('forwards a device last-will (lwt=offline) retained to .../lwt', async () => {
    const { bridge, report } = await setUp();
    const answer = await report('device=shelly-cellar&lwt=offline');
    expect(answer.status).toBe(200);
    await bridge.waitFor((m) => m.some((x) => x.topic === `${root()}shelly-cellar/lwt`), 'the last-will');
    const lwt = bridge.messages.find((m) => m.topic === `${root()}shelly-cellar/lwt`)!;
    expect(lwt.retain).toBe(true);
    expect(lwt.body).toMatchObject({ status: 'offline', reason: 'device last-will' });
  });

  it('keeps buffering while the bridge is down and drains oldest first, exactly once, when it returns', async () => {
    const { bridge, gw, report } = await setUp();
    await bridge.waitFor((m) => m.length >= 2, 'the announcement');
    await bridge.stop();
    await until(() => gw.gateway.status.snapshot().uplink.state !== 'connected', 'the uplink to notice');
    for (let i = 0; i < 60; i++) {
      const answer = await report(`temp=${(i / 10).toFixed(1)}&hum=50&id=shellyht-OUT`);
      expect(answer.status).toBe(200);
    }
    expect(gw.gateway.status.snapshot().buffer.depth).toBe(60);
    expect(gw.gateway.status.snapshot().buffer.oldestAgeSeconds).not.toBeNull();
    const again = new LocalBridge(pki, { port: bridge.port });
    await again.start();
    cleanups.push(() => again.stop());
    await again.waitFor(
      (m) => m.filter((x) => x.topic === `${root()}shellyht-OUT`).length >= 60,
      'the backlog',
    );
    await until(() => gw.gateway.status.snapshot().buffer.depth === 0, 'the buffer to empty');
    const temps = again
      .readings()
      .filter((m) => m.topic === `${root()}shellyht-OUT`)
      .map((m) => m.body.measurements[0].value);
    expect(temps).toEqual(Array.from({ length: 60 }, (_, i) => Number((i / 10).toFixed(1))));
    const times = again
      .readings()
      .filter((m) => m.topic === `${root()}shellyht-OUT`)
      .map((m) => m.body.ts as string);
    expect([...times].sort()).toEqual(times);
    expect(new Set(times).size).toBe(60);
  });

  it('moves a message the cloud refuses for good (PUBACK 0x99) to the dead-letter table and goes on', async () => {
    const { bridge, gw, report } = await setUp({
      refuse: (topic) =>
        topic.endsWith('/shellyht-BAD') ? { code: 0x99, reason: 'payload format invalid' } : null,
    });
    expect((await report('temp=1&id=shellyht-BAD')).status).toBe(200);
    expect((await report('temp=2&id=shellyht-GOOD')).status).toBe(200);
    await bridge.waitFor((m) => m.some((x) => x.topic === `${root()}shellyht-GOOD`), 'the good reading');
    await until(() => gw.gateway.status.snapshot().buffer.deadLetters === 1, 'the dead letter');
    // The bridge holds the good reading before its PUBACK reaches the gateway, which then deletes it.
    await until(() => gw.gateway.status.snapshot().buffer.depth === 0, 'the buffer to empty');
    expect(gw.gateway.status.snapshot().uplink.rejected).toBe(1);
    expect(gw.logs.some((l) => l.reasonCode === 0x99 && l.reason === 'payload format invalid')).toBe(true);
  });

  it('pauses on a busy refusal (PUBACK 0x97, 0x80) and sends again on the same connection, oldest first', async () => {
    let refusals = 0;
    const { bridge, gw, report } = await setUp({
      // The first three readings of the device are refused as busy: twice shedding, once the database.
      refuse: (topic) => {
        if (!topic.endsWith('/shellyht-BUSY') || refusals >= 3) return null;
        refusals++;
        return refusals === 2
          ? { code: 0x80, reason: 'db_unavailable: the database is unavailable; retry with backoff' }
          : { code: 0x97, reason: 'overloaded: the service is at capacity; retry after the delay' };
      },
    });
    for (let i = 1; i <= 5; i++) expect((await report(`temp=${i}&id=shellyht-BUSY`)).status).toBe(200);
    await until(() => gw.gateway.status.snapshot().buffer.depth === 0, 'the buffer to empty');
    const temps = bridge
      .readings()
      .filter((m) => m.topic === `${root()}shellyht-BUSY`)
      .map((m) => m.body.measurements[0].value as number);
    expect([...new Set(temps)].sort()).toEqual([1, 2, 3, 4, 5]);
    const status = gw.gateway.status.snapshot().uplink;
    expect(status).toMatchObject({ connects: 1, rejected: 0 });
    expect(status.deferrals).toBeGreaterThanOrEqual(1);
    const pauses = gw.logs.filter((l) => l.msg === 'the cloud is busy: sending again after a backoff');
    expect(pauses.length).toBe(status.deferrals);
    expect(gw.logs.some((l) => l.msg === 'uplink down: reconnecting after backoff')).toBe(false);
  });

  it('keeps a message refused as not authorised (PUBACK 0x87) and asks again less and less often', async () => {
    // The cloud answers 0x87 when the topic root is not the bridge's or the bridge's site was
    // deleted: nothing the gateway can change, so the reading stays buffered, and the reconnects
    // back off as for a lost connection instead of every half second with a TLS handshake each.
    const { gw, report } = await setUp({
      refuse: (topic) =>
        topic.endsWith('/shellyht-DENIED')
          ? { code: 0x87, reason: "forbidden: the bridge's site was deleted" }
          : null,
    });
    expect((await report('temp=1&id=shellyht-DENIED')).status).toBe(200);
    const retries = () => gw.logs.filter((l) => l.msg === 'uplink down: reconnecting after backoff');
    await until(() => retries().length >= 4, 'four reconnects after the refusal');
    expect(
      retries()
        .map((l) => l.attempt)
        .slice(0, 4),
    ).toEqual([1, 2, 3, 4]);
    const snapshot = gw.gateway.status.snapshot();
    expect(snapshot.buffer.depth).toBe(1);
    expect(snapshot.uplink.rejected).toBe(0);
  });

  it('answers cmd/identify in the log, for a device it knows', async () => {
    const { bridge, gw, report } = await setUp();
    expect((await report('temp=1&id=shellyht-ID')).status).toBe(200);
    await bridge.waitFor((m) => m.some((x) => x.topic === `${root()}shellyht-ID`), 'the reading');
    await until(() => gw.logs.some((l) => l.msg === 'subscribed to cmd/identify'), 'the subscription');
    await bridge.publish(`${root()}shellyht-ID/cmd/identify`, '{}');
    await until(
      () => gw.logs.some((l) => l.device === 'shellyht-ID' && l.result === 'unsupported'),
      'the identify log line',
    );
  });

  it('refuses readings with 503 once the buffer is at capacity, and keeps the ones it holds', async () => {
    const { bridge, gw, report } = await setUp({ buffer: { capacity: 3 } });
    await bridge.waitFor((m) => m.length >= 2, 'the announcement');
    await bridge.stop();
    await until(() => gw.gateway.status.snapshot().uplink.state !== 'connected', 'the uplink to notice');
    for (let i = 0; i < 3; i++) expect((await report(`temp=${i}&id=shellyht-FULL`)).status).toBe(200);
    const full = await report('temp=9&id=shellyht-FULL');
    expect(full.status).toBe(503);
    expect(((await full.json()) as any).error.code).toBe('buffer_full');
    expect(gw.gateway.status.snapshot().collectors['shelly-http']!.refused).toBe(1);
    expect(gw.gateway.status.snapshot().buffer.depth).toBe(3);
    const db = path.join(gw.dir, 'data', 'buffer.db');
    expect(fs.existsSync(db)).toBe(true);
  });
});
