import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { MqttClient } from 'mqtt';
import { check } from '../../scripts/chaos/checker.ts';
import { isoMicros, Load } from '../../scripts/chaos/load.ts';
import { storedKeys } from '../../scripts/chaos/installation.ts';
import { signUp, startTestCloud, type SignedIn } from '../helpers/cloud.ts';
import { DATABASES, tempDir, testDatabase, type TestDatabase } from '../helpers/databases.ts';
import { eventually } from '../helpers/eventually.ts';
import { createDevice, createSite, type CreatedDevice } from '../helpers/fixtures.ts';
import { HttpClient } from '../helpers/http.ts';
import {
  closeClient,
  connectBridge,
  createBridge,
  nextMessage,
  tryConnect,
  type BridgeBundle,
} from '../helpers/mqtt.ts';
import { freePort, spawnReplica, type Replica } from '../helpers/replicas.ts';
import { REDIS_URL, redisPrefix, removeRedisKeys } from '../helpers/redis.ts';

const MINUTE_US = 60_000_000;
/** JOB_CLAIM_SECONDS on the replicas: a dead replica's job is taken over this long after its last renewal. */
const CLAIM_SECONDS = 5;

/**
 * The production layout of docs/operations.md ("Several replicas", "HAProxy"), end to end: two cloud
 * replicas in processes of their own on one PostgreSQL schema and one Redis (a key prefix of this
 * test's own), behind Debian's HAProxy with the documented backends (HTTP round robin checked on
 * `GET /readyz`, MQTT as TCP with TLS passthrough). Clients go through the balancer wherever a real
 * one would; a replica is addressed directly only to show which one did what (its `/metrics`, a
 * bridge held on B, the API of A). The tests run in order on one installation; the last one
 * SIGKILLs replica B.
 */
if (DATABASES.includes('postgres'))
  describe('two replicas behind HAProxy on PostgreSQL and Redis', () => {
    let database: TestDatabase | undefined;
    let prefix = '';
    let a: Replica | undefined;
    let b: Replica | undefined;
    let balancer: Balancer | undefined;
    let hooks: Receiver | undefined;
    let api: HttpClient;
    let main: World;
    let loaded: World;
    const clients: MqttClient[] = [];

    beforeAll(async () => {
      database = testDatabase('postgres');
      prefix = redisPrefix();
      // The accounts are made through an in-process cloud on the same schema, stopped before the
      // replicas start: from then on only the replicas (and their balancer) run.
      const setup = await startTestCloud({ replicaOf: database, env: { LOG_LEVEL: 'warn' } });
      try {
        main = await world(setup, 'main@example.com', ['ingest-1', 'ingest-2', 'alarm', 'limited']);
        loaded = await world(setup, 'load@example.com', ['http-0', 'http-1', 'http-2', 'http-3']);
        main.fridge = await createDevice(setup, main.user.token, main.siteId, {
          local_id: 'fridge-1',
          model: 'mqtt-generic',
        });
      } finally {
        await setup.stop();
      }
      const env = {
        REDIS_URL,
        REDIS_PREFIX: prefix,
        TRUST_PROXY: 'loopback',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        JOB_CLAIM_SECONDS: String(CLAIM_SECONDS),
        // Only the per-device ingest limit is under test; the test's own reads must not meet theirs.
        RATE_LIMIT_MGMT_PER_MIN: '1000000',
        RATE_LIMIT_READ_PER_MIN: '1000000',
      };
      [a, b] = await Promise.all([spawnReplica(database, env), spawnReplica(database, env)]);
      balancer = await startBalancer([a, b]);
      api = new HttpClient(balancer.url);
      hooks = await receiver();
      // Both replicas in rotation: each has passed the balancer's check twice (rise 2).
      for (const r of [a, b])
        await eventually(
          async () => (await counter(r, 'sm_http_requests_total', { route: '/readyz', status: '200' })) >= 2,
          `HAProxy to see ${r.url} ready`,
          30_000,
        );
    }, 180_000);

    afterAll(async () => {
      for (const c of clients.splice(0)) await closeClient(c);
      await balancer?.stop();
      await Promise.all([a?.stop(), b?.stop()]);
      await hooks?.close();
      await database?.dispose();
      await removeRedisKeys(prefix);
    }, 120_000);

    it('ingests through the balancer on both replicas, and keeps /metrics off the public entry', async () => {
      const before = await Promise.all([a!, b!].map((r) => ingestCount(r, '200')));
      const t0 = Date.now() * 1000 - 10 * MINUTE_US;
      for (let i = 0; i < 12; i++) {
        const device = main.devices[`ingest-${(i % 2) + 1}`]!;
        const answer = await ingest(device, t0 + i * 1_000_000, 3 + (i % 5));
        expect(answer.status).toBe(200);
      }
      const after = await Promise.all([a!, b!].map((r) => ingestCount(r, '200')));
      // Round robin: each replica served about half of the twelve.
      expect(after[0]! - before[0]!).toBeGreaterThanOrEqual(3);
      expect(after[1]! - before[1]!).toBeGreaterThanOrEqual(3);
      expect(after[0]! - before[0]! + (after[1]! - before[1]!)).toBe(12);

      // Read back through the balancer: every reading, whichever replica stored it.
      let stored = 0;
      for (const name of ['ingest-1', 'ingest-2']) {
        const sensors = await api.get(`/v1/devices/${main.devices[name]!.id}/sensors`, {
          token: main.user.token,
        });
        expect(sensors.status).toBe(200);
        const channel = sensors.json.data[0].channel_id as string;
        const from = isoMicros(t0 - MINUTE_US);
        const read = await api.get(
          `/v1/channels/${channel}/measurements?from=${encodeURIComponent(from)}&limit=100`,
          { token: main.user.token },
        );
        expect(read.status).toBe(200);
        stored += (read.json.data as unknown[]).length;
      }
      expect(stored).toBe(12);
      expect((await fetch(`${balancer!.url}/metrics`)).status).toBe(404);
    }, 120_000);

    it('opens each excursion as one alarm and notifies it once (webhook and mail), readings through both replicas', async () => {
      const hook = await api.post(
        '/v1/webhooks',
        { url: `${hooks!.url}/alarms`, events: ['alarm.opened', 'alarm.resolved'] },
        { token: main.user.token },
      );
      expect(hook.status).toBe(201);
      const device = main.devices.alarm!;
      // The rule is the site vertical's default for a pharmacy fridge, 2..8 °C with 15 minutes'
      // grace, judged in measurement time: readings of the last hour make the excursions (all
      // within the hour, so no gap becomes a no-data alarm).
      const n = Math.floor(Date.now() / 60_000) * MINUTE_US;
      expect((await ingest(device, n - 50 * MINUTE_US, 5)).status).toBe(200);

      const events: string[] = [];
      for (const start of [n - 48 * MINUTE_US, n - 26 * MINUTE_US]) {
        const before = await Promise.all([a!, b!].map((r) => ingestCount(r, '200')));
        const opened = hooks!.next((h) => h.path === '/alarms' && h.event === 'alarm.opened', 'alarm.opened');
        // Only this device leaves its range in this test: the next alarm.opened is its own. Above
        // 8 °C for sixteen minutes, a reading every four; the excursion is older than its grace
        // in measurement time, so the alarm opens.
        for (let k = 0; k <= 4; k++) {
          expect((await ingest(device, start + k * 4 * MINUTE_US, 10 + (k % 3))).status).toBe(200);
        }
        const open = await opened;
        const resolved = hooks!.next(
          (h) => h.path === '/alarms' && h.event === 'alarm.resolved',
          'alarm.resolved',
        );
        expect((await ingest(device, start + 18 * MINUTE_US, 5)).status).toBe(200);
        const closed = await resolved;
        const after = await Promise.all([a!, b!].map((r) => ingestCount(r, '200')));
        expect(after[0]! - before[0]!).toBeGreaterThanOrEqual(1);
        expect(after[1]! - before[1]!).toBeGreaterThanOrEqual(1);
        expect(open.body.data).toEqual(
          // The excursion is taken to last until a reading ends it, so the alarm may open on any of
          // its readings; its peak so far depends on which (the final one is checked below).
          expect.objectContaining({ kind: 'threshold_high', started_at: isoSeconds(start) }),
        );
        expect(closed.body.data.id).toBe(open.body.data.id);
        events.push(open.body.data.id as string);
      }

      // Settled: every delivery of the webhook done, and the mails of both alarms sent.
      const deliveries = await eventually(
        async () => {
          const list = await api.get(`/v1/webhooks/${hook.json.id}/deliveries?limit=100`, {
            token: main.user.token,
          });
          const data = list.json.data as { id: string; type: string; state: string }[];
          return data.length === 4 && data.every((d) => d.state === 'delivered') ? data : null;
        },
        'the four alarm deliveries to be delivered',
        30_000,
      );
      const mails = await eventually(
        () => {
          const found = outboxMails([a!, b!]).filter((m) =>
            events.some((id) => m.includes(`/app/events/${id}`)),
          );
          return found.length >= 4 ? found : null;
        },
        'the alarm mails',
        30_000,
      );
      const sensor = (await api.get(`/v1/devices/${device.id}/sensors`, { token: main.user.token })).json
        .data[0] as { id: string };
      const listed = await api.get(`/v1/events?sensor_id=${sensor.id}&include_withdrawn=true`, {
        token: main.user.token,
      });
      expect(
        (listed.json.data as { id: string; state: string; peak_value: number }[])
          .map((e) => [e.id, e.state, e.peak_value])
          .sort(),
      ).toEqual(events.map((id) => [id, 'resolved', 12]).sort());
      // Once per excursion: one alarm.opened and one alarm.resolved each, delivered once each.
      const byEvent = (type: string) =>
        hooks!.received
          .filter((h) => h.path === '/alarms' && h.event === type)
          .map((h) => h.body.data.id as string)
          .sort();
      expect(byEvent('alarm.opened')).toEqual([...events].sort());
      expect(byEvent('alarm.resolved')).toEqual([...events].sort());
      expect(deliveries.map((d) => d.type).sort()).toEqual([
        'alarm.opened',
        'alarm.opened',
        'alarm.resolved',
        'alarm.resolved',
      ]);
      // The subject's first word, whether plain or RFC 2047-encoded (`=?UTF-8?Q?ALARM=3A_...`).
      const subjects = mails.map((m) => /^Subject: (?:=\?UTF-8\?Q\?)?(\w+)/m.exec(m)![1]).sort();
      expect(subjects).toEqual(['ALARM', 'ALARM', 'Resolved', 'Resolved']);
    }, 120_000);

    it('shares the device rate limit: 60 a minute across both replicas, the 61st is 429 whichever answers', async () => {
      const device = main.devices.limited!;
      const before = await Promise.all([a!, b!].map((r) => ingestCount(r, '429')));
      const answers: { status: number; reset: number; retryAfter: string | null; code: string | null }[] = [];
      const t0 = Date.now() * 1000 - 30 * MINUTE_US;
      // Until four refusals in one window (a request sent across a window's end starts counting again).
      for (let i = 0; i < 300; i++) {
        const answer = await ingest(device, t0 + i * 1_000_000, 4);
        answers.push({
          status: answer.status,
          reset: Number(answer.headers.get('x-ratelimit-reset')),
          retryAfter: answer.headers.get('retry-after'),
          code: answer.status === 429 ? (answer.json.error.code as string) : null,
        });
        const window = answers.at(-1)!.reset;
        if (answers.filter((x) => x.reset === window && x.status === 429).length === 4) break;
      }
      const window = answers.at(-1)!.reset;
      const inWindow = answers.filter((x) => x.reset === window);
      expect(inWindow.map((x) => x.status)).toEqual([...Array<number>(60).fill(200), 429, 429, 429, 429]);
      for (const refused of inWindow.slice(60)) {
        expect(refused.code).toBe('rate_limited');
        expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
        expect(Number(refused.retryAfter)).toBeLessThanOrEqual(60);
      }
      const after = await Promise.all([a!, b!].map((r) => ingestCount(r, '429')));
      // The four refusals came from both replicas (round robin).
      expect(after[0]! - before[0]!).toBeGreaterThanOrEqual(1);
      expect(after[1]! - before[1]!).toBeGreaterThanOrEqual(1);
    }, 120_000);

    it("delivers a cmd/identify asked through A's API to the bridge connected to B", async () => {
      const onB = await connectBridge(b!.mqttUrl, main.bridge);
      clients.push(onB);
      await onB.subscribeAsync(`${main.bridge.topic_root}+/cmd/#`, { qos: 1 });
      const onA = new HttpClient(a!.url);
      await eventually(async () => {
        const got = await onA.get(`/v1/bridges/${main.bridge.id}`, { token: main.user.token });
        return got.json.connected === true;
      }, 'the bridge on B to show connected through A');
      const got = nextMessage(onB, (topic) => topic.endsWith('/cmd/identify'));
      const asked = await onA.post(`/v1/devices/${main.fridge!.id}/identify`, undefined, {
        token: main.user.token,
      });
      expect(asked.json).toEqual({ status: 'sent' });
      const message = await got;
      expect(message.topic).toBe(`${main.bridge.topic_root}fridge-1/cmd/identify`);
    }, 120_000);

    it('refuses on B, and through the balancer, the certificate revoked through A, at once', async () => {
      const onB = clients.at(-1)!;
      expect(onB.connected).toBe(true);
      const dropped = new Promise<{ reasonCode?: number; at: number }>((resolve) =>
        onB.once('disconnect', (packet) => resolve({ reasonCode: packet.reasonCode, at: Date.now() })),
      );
      const asked = Date.now();
      const revoked = await new HttpClient(a!.url).delete(`/v1/bridges/${main.bridge.id}`, {
        token: main.user.token,
      });
      expect(revoked.status).toBe(204);
      const { reasonCode, at } = await dropped;
      expect(reasonCode).toBe(0x87);
      // B's periodic check runs every 15 s: the notification is what made it this quick.
      expect(at - asked).toBeLessThan(10_000);
      expect(await tryConnect(b!.mqttUrl, main.bridge)).toEqual(
        expect.objectContaining({ outcome: 'refused' }),
      );
      for (let i = 0; i < 2; i++)
        expect(await tryConnect(balancer!.mqttUrl, main.bridge)).toEqual(
          expect.objectContaining({ outcome: 'refused' }),
        );
    }, 120_000);

    it('loses nothing acknowledged when B is SIGKILLed mid-load, and A takes over the job B held', async () => {
      const hook = await api.post(
        '/v1/webhooks',
        { url: `${hooks!.url}/held`, events: ['device.online'] },
        { token: loaded.user.token },
      );
      expect(hook.status).toBe(201);
      // Each replica runs one job at a time: two deliveries held at once are one on each replica.
      hooks!.holding = true;
      const load = new Load(
        {
          url: balancer!.url,
          mqttUrl: balancer!.mqttUrl,
          topicRoot: `service/${loaded.user.accountId}`,
          bridge: loaded.bridge,
          devices: Object.values(loaded.devices).map((d) => ({ localId: d.local_id, token: d.ingest_token })),
        },
        { httpSenders: 4, mqttSenders: 4, pauseMs: 300, attemptTimeoutMs: 10_000 },
      );
      const bIngestBefore = await ingestCount(b!, '200');
      try {
        load.start();
        await load.acksMore(20);
        await hooks!.waitHeld(2);
        // B is carrying both kinds of load when it dies: MQTT senders connected to it, ingest answered by it.
        expect(await counter(b!, 'sm_mqtt_connections', {})).toBeGreaterThanOrEqual(1);
        expect(await ingestCount(b!, '200')).toBeGreaterThan(bIngestBefore);
        const ackedBefore = load.acks;
        const bClosed = hooks!.nextClosed();
        b!.child.kill('SIGKILL');
        await b!.exited;
        const onB = await bClosed;
        hooks!.release();
        await load.acksMore(40);
        await load.stop();

        // Nothing acknowledged is lost or stored twice: the account export, through the balancer.
        const result = check(
          load.readings(),
          await storedKeys({ url: balancer!.url, adminToken: loaded.user.token, dataDir: database!.dataDir }),
        );
        expect({ lost: result.lost.length, duplicated: result.duplicated.length }).toEqual({
          lost: 0,
          duplicated: 0,
        });
        expect(result.unexpected).toEqual([]);
        expect(ackedBefore).toBeGreaterThanOrEqual(20);
        expect(result.acknowledged).toBeGreaterThanOrEqual(ackedBefore + 40);
        expect(load.tally.serverErrors).toEqual([]);
        expect(load.tally.refused).toEqual([]);

        // The delivery B was sending when it died: claimed again once its claim lapsed, sent by A.
        const deliveries = await eventually(
          async () => {
            const list = await api.get(`/v1/webhooks/${hook.json.id}/deliveries?limit=100`, {
              token: loaded.user.token,
            });
            const data = list.json.data as {
              id: string;
              state: string;
              attempts: { attempt: number; status: number | null }[];
            }[];
            return data.length === 8 && data.every((d) => d.state === 'delivered') ? data : null;
          },
          'every device.online delivery to be delivered',
          60_000,
        );
        const taken = deliveries.find((d) => d.id === onB.delivery)!;
        // B's attempt died with B (nothing recorded); the one recorded is the second claim's, A's.
        expect(taken.attempts).toEqual([expect.objectContaining({ attempt: 2, status: 200 })]);
        expect(hooks!.received.filter((h) => h.delivery === onB.delivery).map((h) => h.answered)).toEqual([
          'closed',
          200,
        ]);
        const online = hooks!.received.filter((h) => h.path === '/held' && h.answered === 200);
        expect(online.map((h) => h.body.data.local_id as string).sort()).toEqual(
          ['http-0', 'http-1', 'http-2', 'http-3', 'mqtt-0', 'mqtt-1', 'mqtt-2', 'mqtt-3'].sort(),
        );
      } finally {
        hooks!.release();
        await load.stop();
      }
    }, 150_000);

    /** One account's site, HTTP devices and bridge, made through the API. */
    interface World {
      user: SignedIn;
      siteId: string;
      devices: Record<string, CreatedDevice>;
      bridge: BridgeBundle;
      fridge?: CreatedDevice;
    }

    async function world(
      setup: Awaited<ReturnType<typeof startTestCloud>>,
      email: string,
      names: string[],
    ): Promise<World> {
      const user = await signUp(setup, email);
      // A pharmacy: fridges at 2..8 °C, 15 minutes' grace (the vertical's default rule).
      const siteId = (await createSite(setup, user.token, { vertical: 'pharma' })).id;
      const devices: Record<string, CreatedDevice> = {};
      for (const name of names)
        devices[name] = await createDevice(setup, user.token, siteId, {
          local_id: name,
        });
      return { user, siteId, devices, bridge: await createBridge(setup, user.token, siteId) };
    }

    /** One reading of `device` through the balancer. */
    function ingest(device: CreatedDevice, us: number, value: number) {
      return api.post(
        '/v1/ingest',
        { device: device.local_id, ts: isoMicros(us), measurements: [{ type: 'temperature', value }] },
        { token: device.ingest_token },
      );
    }
  });

/** `POST /v1/ingest` answers a replica gave, with this status, as its `/metrics` counts them. */
function ingestCount(replica: Replica, status: string): Promise<number> {
  return counter(replica, 'sm_http_requests_total', { route: '/v1/ingest', method: 'POST', status });
}

/** The sum of a series' values whose labels include `labels`, read from the replica's own `/metrics`. */
async function counter(replica: Replica, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await fetch(`${replica.url}/metrics`)).text();
  let total = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name} `)) {
      if (Object.keys(labels).length === 0) total += Number(line.slice(name.length + 1));
      continue;
    }
    if (!line.startsWith(`${name}{`)) continue;
    const close = line.lastIndexOf('}');
    const have = Object.fromEntries(
      [...line.slice(name.length + 1, close).matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) total += Number(line.slice(close + 1));
  }
  return total;
}

/** Every mail in the replicas' outboxes (without SMTP_URL, a mail is an `.eml` in the sender's DATA_DIR). */
function outboxMails(replicas: Replica[]): string[] {
  const mails: string[] = [];
  for (const r of replicas) {
    const dir = path.join(r.dataDir, 'outbox');
    if (!fs.existsSync(dir)) continue;
    for (const file of fs.readdirSync(dir))
      mails.push(
        fs
          .readFileSync(path.join(dir, file), 'utf8')
          .replace(/=\r?\n/g, '')
          .replace(/=3D/g, '='),
      );
  }
  return mails;
}

function isoSeconds(us: number): string {
  return new Date(Math.floor(us / 1000)).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

interface Balancer {
  url: string;
  mqttUrl: string;
  stop(): Promise<void>;
}

/**
 * Debian's HAProxy in the foreground (`-db`) with docs/operations.md's configuration on 127.0.0.1
 * (HTTP without TLS), its file in a temporary directory.
 */
async function startBalancer(replicas: Replica[]): Promise<Balancer> {
  const dir = tempDir('sm-haproxy-');
  const [httpPort, mqttPort] = [await freePort(), await freePort()];
  const servers = (line: (r: Replica, i: number) => string) => replicas.map(line).join('\n');
  const config = `global
    maxconn 4096

defaults
    timeout connect 5s
    timeout check 5s
    timeout client  65s
    timeout server  65s
    retries 2
    option redispatch

frontend https
    mode http
    bind 127.0.0.1:${httpPort}
    http-request deny deny_status 404 if { path /metrics }
    option forwardfor
    default_backend cloud_http

backend cloud_http
    mode http
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    retry-on conn-failure empty-response response-timeout
    timeout server 90s
${servers((r, i) => `    server cloud${i + 1} 127.0.0.1:${r.port} check inter 1s fall 2 rise 2`)}

frontend mqtts
    mode tcp
    bind 127.0.0.1:${mqttPort}
    default_backend cloud_mqtt

backend cloud_mqtt
    mode tcp
    balance leastconn
    option httpchk GET /readyz
${servers((r, i) => `    server cloud${i + 1} 127.0.0.1:${r.mqttPort} check port ${r.port} inter 1s fall 2 rise 2`)}
`;
  const file = path.join(dir, 'haproxy.cfg');
  fs.writeFileSync(file, config);
  const child: ChildProcess = spawn('/usr/sbin/haproxy', ['-db', '-f', file], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  const url = `http://127.0.0.1:${httpPort}`;
  try {
    await eventually(
      async () => {
        if (child.exitCode !== null) throw new Error(`haproxy exited (${child.exitCode}):\n${stderr}`);
        return fetch(`${url}/readyz`).then(
          (r) => r.status === 200,
          () => false,
        );
      },
      'HAProxy to listen',
      30_000,
    );
  } catch (err) {
    child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    url,
    mqttUrl: `mqtts://127.0.0.1:${mqttPort}`,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

interface Hit {
  path: string;
  event: string;
  delivery: string;
  body: { data: Record<string, unknown> };
  /** The status it was answered with, or `closed` when the sender went away first. */
  answered: number | 'closed' | null;
}

interface Receiver {
  url: string;
  received: Hit[];
  /** While true, deliveries to `/held` are kept unanswered. */
  holding: boolean;
  /** Resolves once `n` deliveries are held unanswered at the same time. */
  waitHeld(n: number): Promise<void>;
  /** Resolves with the next held delivery whose sender went away. */
  nextClosed(): Promise<Hit>;
  /** Answers the held deliveries 200, and every later one at once. */
  release(): void;
  /** Resolves with the next delivery matching; rejects, naming `what`, after a minute without it. */
  next(match: (h: Hit) => boolean, what: string): Promise<Hit>;
  close(): Promise<void>;
}

/** A webhook receiver on 127.0.0.1 that records every delivery and can hold some unanswered. */
async function receiver(): Promise<Receiver> {
  const received: Hit[] = [];
  const held: { hit: Hit; res: http.ServerResponse }[] = [];
  const waiters: (() => void)[] = [];
  const changed = () => waiters.splice(0).forEach((w) => w());
  const until = async <T>(value: () => T | undefined): Promise<T> => {
    for (;;) {
      const v = value();
      if (v !== undefined) return v;
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  };
  const self: Receiver = {
    url: '',
    received,
    holding: false,
    waitHeld: (n) =>
      until(() => (held.filter((h) => h.hit.answered === null).length >= n ? true : undefined)).then(
        () => undefined,
      ),
    nextClosed: () => {
      const before = new Set(received.filter((h) => h.answered === 'closed'));
      return until(() => received.find((h) => h.answered === 'closed' && !before.has(h)));
    },
    release: () => {
      self.holding = false;
      for (const { hit, res } of held.splice(0)) {
        if (hit.answered !== null) continue;
        hit.answered = 200;
        res.end('ok');
      }
      changed();
    },
    next: (match, what) => {
      const before = new Set(received);
      let timer: NodeJS.Timeout | undefined;
      return Promise.race([
        until(() => received.find((h) => !before.has(h) && match(h))),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no webhook delivery: ${what}`)), 60_000);
        }),
      ]).finally(() => clearTimeout(timer));
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const hit: Hit = {
        path: req.url ?? '',
        event: String(req.headers['x-service-event']),
        delivery: String(req.headers['x-service-delivery']),
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
        answered: null,
      };
      received.push(hit);
      if (self.holding && hit.path === '/held') {
        held.push({ hit, res });
        res.on('close', () => {
          if (hit.answered === null) hit.answered = 'closed';
          changed();
        });
      } else {
        hit.answered = 200;
        res.end('ok');
      }
      changed();
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  self.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return self;
}
