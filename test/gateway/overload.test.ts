import { afterEach, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import type { ShellyHttpCollector } from '../../gateway/src/collectors/shelly-http/shelly-http.collector.ts';
import { ShellyHtGen1Emulator } from '../../hardware/emulators/shelly-ht-gen1.ts';
import { signUp, startTestCloud, type TestCloud } from '../helpers/cloud.ts';
import { DATABASES } from '../helpers/databases.ts';
import { eventually } from '../helpers/eventually.ts';
import { createDevice, createSite } from '../helpers/fixtures.ts';
import { createBridge } from '../helpers/mqtt.ts';
import { holdIngestWrites } from '../helpers/row-locks.ts';
import { channelPoints, saveBundle } from './helpers/cloud-reads.ts';
import { startTestGateway, tempDir, until, writeGatewayConfig, type TestGateway } from './helpers/gateway.ts';

/**
 * A gateway's backlog against a cloud that sheds load (ingest admission control, INGEST_MAX_PENDING
 * of 10): the publishes refused with PUBACK 0x97 stay in the gateway's buffer and are sent again,
 * on the same connection, after its backoff, until every reading it accepted is stored, once.
 *
 * The cloud's writes are held (a lock on its ingest journal) with ten HTTP requests pending when the
 * backlog arrives, so that its publishes are shed: PostgreSQL only, as on SQLite a write waiting for
 * the database's lock would hold the test's own thread. After the release each round of the
 * gateway's window has up to ten publishes accepted and the rest refused again: a limit of one would
 * make that a round per reading, 80 backoffs, which a loaded CI machine stretched past a minute.
 * (test/gateway/uplink.test.ts shows the gateway's side against a stand-in bridge.)
 */
/** The cloud's INGEST_MAX_PENDING, and the HTTP requests held pending to reach it. */
const LIMIT = 10;

describe.each(DATABASES.filter((db) => db === 'postgres'))(
  'gateway uplink against an overloaded cloud on %s',
  (db) => {
    let t: TestCloud | null = null;
    let gw: TestGateway | null = null;
    let dir: string | null = null;

    afterEach(async () => {
      await gw?.stop();
      await t?.stop();
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    });

    it('sends every reading refused with 0x97 again, and each is stored once', async () => {
      t = await startTestCloud({
        db,
        mqtt: true,
        env: { INGEST_MAX_PENDING: String(LIMIT), RATE_LIMIT_MODE: 'warn' },
      });
      const cloud = t;
      const user = await signUp(cloud, 'overload@example.com');
      const siteId = (await createSite(cloud, user.token)).id;
      const bundle = await createBridge(cloud, user.token, siteId);
      dir = tempDir('gw-overload-');
      const file = writeGatewayConfig(dir, {
        bundle: (f) => saveBundle(f, cloud, bundle),
        collectors: { shelly_http: { host: '127.0.0.1', port: 0 } },
        uplink: { inflight: 50 },
      });
      gw = await startTestGateway(file);
      const gateway = gw.gateway;
      // A backlog first, so that the uplink sends a window of publishes at once when it starts again.
      await gateway.uplink.stop();
      const http = gateway.collector<ShellyHttpCollector>('shelly-http');
      const devices = ['shellyht-A1', 'shellyht-B2'].map(
        (id) => new ShellyHtGen1Emulator({ url: `http://127.0.0.1:${http.port}/`, id }),
      );
      const sent: Record<string, number[]> = { 'shellyht-A1': [], 'shellyht-B2': [] };
      for (let n = 1; n <= 40; n++) {
        for (const [i, d] of devices.entries()) {
          const value = n + i / 10;
          expect(await d.report({ temperature: value, humidity: 50 })).toBe(200);
          sent[i === 0 ? 'shellyht-A1' : 'shellyht-B2']!.push(value);
        }
      }
      const connects = gateway.status.snapshot().uplink.connects;
      const release = await holdIngestWrites(cloud.database);
      let pending: Promise<{ status: number }[]> | undefined;
      try {
        // LIMIT requests waiting for the held writes: the cloud is at its limit (INGEST_MAX_PENDING).
        const probe = await createDevice(cloud, user.token, siteId, { local_id: 'probe' });
        pending = Promise.all(
          Array.from({ length: LIMIT }, (_, i) =>
            cloud.http.post(
              '/v1/ingest',
              { device: 'probe', measurements: [{ type: 'temperature', value: i }] },
              { token: probe.ingest_token },
            ),
          ),
        );
        await until(() => cloud.cloud.services.ingest.overloaded(), 'the requests to be pending', 30_000);
        gateway.uplink.start();
        // The bridge answers a connection's publishes in order, so the refusals reach the gateway
        // once the writes ahead of them (its announcement) are released.
        await eventually(async () => {
          const metrics = (await cloud.http.get('/metrics')).text;
          return /sm_ingest_rejected_requests_total\{way="mqtt",code="overloaded"\} [1-9]/.test(metrics);
        }, 'the cloud to shed publishes');
      } finally {
        await release();
      }
      expect((await pending)?.map((r) => r.status)).toEqual(Array(LIMIT).fill(200));
      await until(() => gateway.status.snapshot().buffer.depth === 0, 'the backlog to drain', 60_000);

      // The cloud refused some with 0x97, and the gateway kept them and sent them again after a
      // pause, on the same connection.
      const refusals = gw.logs.filter((l) => l.msg === 'the cloud is busy: sending again after a backoff');
      expect(refusals.length).toBeGreaterThan(0);
      expect(new Set(refusals.map((l) => l.reasonCode))).toEqual(new Set([0x97]));
      expect(gateway.status.snapshot().uplink).toMatchObject({ rejected: 0, connects: connects + 1 });
      expect(gateway.status.snapshot().uplink.deferrals).toBe(refusals.length);
      for (const [device, values] of Object.entries(sent)) {
        const temps = await eventually(async () => {
          const p = await channelPoints(cloud, user.token, siteId, device, 'temperature');
          return p.length >= values.length ? p : null;
        }, `${device}'s ${values.length} temperatures`);
        expect(temps.map((p) => p.value)).toEqual(values);
      }
    }, 120_000);
  },
);
