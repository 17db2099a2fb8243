import { afterEach, describe, expect, it } from '@jest/globals';
import type mqttPacket from 'mqtt-packet';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite, type CreatedDevice } from '../../helpers/fixtures.ts';
import { createBridge, rawConnect, type RawClient } from '../../helpers/mqtt.ts';
import { eventually } from '../../helpers/eventually.ts';
import { holdIngestWrites } from '../../helpers/row-locks.ts';

/**
 * Ingest's admission control (docs/design/ingest.md, "Admission control"): a process that holds
 * INGEST_MAX_PENDING requests refuses more with 503 `overloaded` and `Retry-After` (HTTP) or PUBACK
 * 0x97 (MQTT), before doing any of their work. What it refused is not stored; what it accepted is.
 * The limit here is 1 request, so that any burst of a few requests meets it.
 */
const BURST = 60;
const ENV = { INGEST_MAX_PENDING: '1', RATE_LIMIT_INGEST_PER_MIN: '1000000' };
const BASE = Date.UTC(2026, 0, 1);

/** The times (microseconds) of the device's stored temperatures. */
async function storedTimes(t: TestCloud, deviceId: string): Promise<number[]> {
  const rows = await t.cloud.services.db
    .selectFrom('measurements')
    .innerJoin('sensors', 'sensors.seq', 'measurements.sensor_seq')
    .where('sensors.device_id', '=', deviceId)
    .select('measurements.ts')
    .execute();
  return rows.map((r) => Number(r.ts)).sort((a, b) => a - b);
}

describe.each(DATABASES)('ingest admission control on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  const sockets: RawClient[] = [];

  afterEach(async () => {
    for (const c of sockets.splice(0)) c.socket.destroy();
    await t?.stop();
  });

  /** One reading per request, each at its own second; the answers of a burst sent at once. */
  async function burst(device: CreatedDevice, from: number, idempotent: boolean) {
    return Promise.all(
      Array.from({ length: BURST }, async (_, i) => {
        const us = (BASE + (from + i) * 1000) * 1000;
        const answer = await t.http.post(
          '/v1/ingest',
          {
            device: device.local_id,
            ts: new Date(us / 1000).toISOString(),
            measurements: [{ type: 'temperature', value: 4 }],
          },
          { token: device.ingest_token, headers: idempotent ? { 'idempotency-key': `k-${from + i}` } : {} },
        );
        return { us, answer };
      }),
    );
  }

  it.each([
    ['the fast path', false],
    ['the Express pipeline (Idempotency-Key)', true],
  ])(
    'answers 503 overloaded with Retry-After over its limit (%s), and stores exactly what it accepted',
    async (_way, idempotent) => {
      t = await startTestCloud({ db, env: ENV });
      user = await signUp(t, 'ops@example.com');
      const site = await createSite(t, user.token);
      const device = await createDevice(t, user.token, site.id, { local_id: 'probe' });
      const accepted: number[] = [];
      let shed = 0;
      // Bursts until one met the limit: on a loaded machine one may arrive slowly enough to pass whole.
      for (let round = 0; round < 20 && (shed === 0 || accepted.length === 0); round++) {
        for (const { us, answer } of await burst(device, round * BURST, idempotent)) {
          if (answer.status === 200) {
            accepted.push(us);
            continue;
          }
          expect({ status: answer.status, code: answer.json?.error?.code }).toEqual({
            status: 503,
            code: 'overloaded',
          });
          expect(answer.headers.get('retry-after')).toBe('1');
          expect(answer.json.error.request_id).toBe(answer.headers.get('x-request-id'));
          shed++;
        }
      }
      expect(shed).toBeGreaterThan(0);
      expect(accepted.length).toBeGreaterThan(0);
      // Nothing refused is stored; nothing accepted is missing or stored twice.
      expect(await storedTimes(t, device.id)).toEqual(accepted.sort((a, b) => a - b));
      // Shedding is logged when it starts, not once per request, and never as a failure.
      expect(t.logs.filter((l) => l.msg === 'request failed')).toEqual([]);
      expect(t.logs.some((l) => String(l.msg).startsWith('ingest overloaded: shedding load'))).toBe(true);
      // Once the burst is answered, a request is admitted again.
      const after = await t.http.post(
        '/v1/ingest',
        {
          device: 'probe',
          ts: new Date(BASE - 1000).toISOString(),
          measurements: [{ type: 'temperature', value: 5 }],
        },
        { token: device.ingest_token },
      );
      expect(after.status).toBe(200);
      const metrics = await t.http.get('/metrics');
      expect(metrics.text).toMatch(/sm_ingest_rejected_requests_total\{way="http",code="overloaded"\} [1-9]/);
    },
    120_000,
  );

  if (db === 'postgres')
    it('counts the requests it refuses at the door without an access-log line for each', async () => {
      t = await startTestCloud({ db, env: ENV });
      user = await signUp(t, 'quiet@example.com');
      const site = await createSite(t, user.token);
      const device = await createDevice(t, user.token, site.id, { local_id: 'quiet' });
      const send = (i: number) =>
        t.http.post(
          '/v1/ingest',
          {
            device: 'quiet',
            ts: new Date(BASE + i * 1000).toISOString(),
            measurements: [{ type: 'temperature', value: 4 }],
          },
          { token: device.ingest_token },
        );
      const release = await holdIngestWrites(t.database);
      let first;
      let refused;
      try {
        // One request waits for its write: the process is at INGEST_MAX_PENDING, and refuses the rest.
        first = send(0);
        await eventually(() => t.cloud.services.ingest.overloaded(), 'the first request to be pending');
        refused = await Promise.all(Array.from({ length: 20 }, (_, i) => send(i + 1)));
      } finally {
        await release();
      }
      expect((await first).status).toBe(200);
      expect(refused.map((r) => r.json?.error?.code)).toEqual(Array(20).fill('overloaded'));
      const accessLines = t.logs.filter((l) => l.msg === 'request' && l.url === '/v1/ingest');
      expect(accessLines.map((l) => l.status)).toEqual([200]);
      const metrics = await t.http.get('/metrics');
      expect(metrics.text).toMatch(/sm_ingest_rejected_requests_total\{way="http",code="overloaded"\} 20\b/);
      expect(metrics.text).toMatch(
        /sm_http_requests_total\{route="\/v1\/ingest",method="POST",status="503"\} 20\b/,
      );
    });

  // On SQLite a write waiting for the database's lock holds the process's only thread (the busy
  // timeout waits synchronously), so a held database cannot be shown in this process: PostgreSQL only.
  if (db === 'postgres')
    it('answers PUBACK 0x97 to MQTT measurements over its limit, and stores exactly what it acknowledged', async () => {
      t = await startTestCloud({ db, mqtt: true, env: ENV });
      user = await signUp(t, 'ops@example.com');
      const bundle = await createBridge(t, user.token, (await createSite(t, user.token)).id);
      // Two connections of the bridge: the bridge answers one connection's publishes in order, so
      // it is another connection's publish that meets the request the process already holds.
      const a = await rawConnect(t, bundle, { clientId: 'overload-a' });
      const b = await rawConnect(t, bundle, { clientId: 'overload-b' });
      sockets.push(a, b);
      expect([a.connack.reasonCode, b.connack.reasonCode]).toEqual([0, 0]);
      let id = 0;
      const publish = (c: RawClient): number => {
        const messageId = ++id;
        const us = (BASE + messageId * 1000) * 1000;
        c.send({
          cmd: 'publish',
          topic: `service/${user.accountId}/fridge-1`,
          payload: Buffer.from(
            JSON.stringify({
              ts: new Date(us / 1000).toISOString(),
              measurements: [{ type: 'temperature', value: 4 }],
            }),
          ),
          qos: 1,
          messageId,
          dup: false,
          retain: false,
        });
        return us;
      };
      const acked: number[] = [];
      // A first reading creates the device and its channel.
      const first = publish(a);
      expect(((await a.next('puback')) as mqttPacket.IPubackPacket).reasonCode).toBe(0);
      acked.push(first);
      // With the database held, one of the next two readings waits in the process (its limit is one
      // request) and the other is refused at once; the hold ends at that refusal.
      const release = await holdIngestWrites(t.database);
      let answers: { us: number; puback: mqttPacket.IPubackPacket }[];
      try {
        const sent = [a, b].map((c) => ({ us: publish(c), puback: c.next('puback') }));
        const refused = await Promise.race(sent.map(async (x) => ({ us: x.us, puback: await x.puback })));
        await release();
        answers = await Promise.all(
          sent.map(async (x) => ({ us: x.us, puback: (await x.puback) as mqttPacket.IPubackPacket })),
        );
        expect(refused.puback.cmd).toBe('puback');
      } catch (err) {
        await release().catch(() => undefined);
        throw err;
      }
      const codes = answers.map((x) => x.puback.reasonCode).sort((x, y) => x! - y!);
      expect(codes).toEqual([0, 0x97]);
      const shed = answers.find((x) => x.puback.reasonCode === 0x97)!;
      expect(shed.puback.properties?.reasonString).toMatch(/^overloaded: /);
      acked.push(answers.find((x) => x.puback.reasonCode === 0)!.us);
      const device = await t.cloud.services.db
        .selectFrom('devices')
        .where('local_id', '=', 'fridge-1')
        .select('id')
        .executeTakeFirstOrThrow();
      expect(await storedTimes(t, device.id)).toEqual(acked.sort((a, b) => a - b));
      expect(t.logs.filter((l) => l.msg === 'MQTT publish failed')).toEqual([]);
    }, 120_000);
});
