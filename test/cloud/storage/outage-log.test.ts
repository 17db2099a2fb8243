import net from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { sql } from 'kysely';
import { createLogger } from '../../../cloud/src/logger.ts';
import { DatabaseOutageLog } from '../../../cloud/src/storage/outage-log.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createDevice, createSite, type CreatedDevice } from '../../helpers/fixtures.ts';
import {
  closeClient,
  connectBridge,
  createBridge,
  publish,
  tryConnect,
  type BridgeBundle,
} from '../../helpers/mqtt.ts';

/**
 * A database outage is two lines in the log, one when it starts (error) and one when it ends (warn,
 * with what was refused meanwhile), not a line at error level per refused request: the chaos run
 * `pg-outage` wrote 2,958 of those in one run (docs/operations.md, "When the database is down").
 */

type Line = Record<string, unknown>;

const STARTED = /^database unavailable/;
const ENDED = 'database available again';

function linesOf(logs: Line[], msg: string | RegExp): Line[] {
  return logs.filter((l) => (typeof msg === 'string' ? l.msg === msg : msg.test(String(l.msg))));
}

/** The lines a refused request or publish wrote before the outage log existed: none may be left. */
function perRefusalErrors(logs: Line[]): Line[] {
  return logs.filter(
    (l) =>
      Number(l.level) >= 50 &&
      [
        'request failed',
        'MQTT publish failed',
        'MQTT authentication failed',
        'job queue: claiming failed',
      ].includes(String(l.msg)),
  );
}

function capture(level = 'debug'): { logs: Line[]; log: ReturnType<typeof createLogger> } {
  const logs: Line[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logs.push(JSON.parse(line) as Line);
      done();
    },
  });
  return { logs, log: createLogger(level, sink) };
}

describe('the database outage log', () => {
  it('logs an outage once when it starts and once when it ends, with the counts, each refusal at debug', async () => {
    const { logs, log } = capture();
    let up = false;
    const outage = new DatabaseOutageLog({
      log,
      probe: async () => {
        if (!up) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
      },
      probeMs: 10,
      reminderMs: 60_000,
    });
    const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    for (let i = 0; i < 500; i++) outage.refused('request', cause, { req_id: `req_${i}` });
    for (let i = 0; i < 200; i++) outage.refused('publish', cause);
    outage.refused('connection', cause);
    outage.refused('background', cause);
    expect(outage.down).toBe(true);
    const started = linesOf(logs, STARTED);
    expect(started).toHaveLength(1);
    expect(started[0]).toMatchObject({ level: 50, req_id: 'req_0', err: { code: 'ECONNREFUSED' } });
    expect(logs.filter((l) => Number(l.level) >= 40)).toHaveLength(1);
    expect(linesOf(logs, 'request refused: database unavailable')).toHaveLength(500);
    expect(linesOf(logs, 'publish refused: database unavailable').every((l) => l.level === 20)).toBe(true);
    up = true;
    const [ended] = await eventually(() => {
      const found = linesOf(logs, ENDED);
      return found.length ? found : null;
    }, 'the end of the outage in the log');
    expect(ended).toMatchObject({
      level: 40,
      refused_requests: 500,
      refused_publishes: 200,
      refused_connections: 1,
      failed_background_runs: 1,
    });
    expect(ended!.down_ms).toEqual(expect.any(Number));
    expect(outage.down).toBe(false);
    // The next refusal is a new outage, counted from zero.
    up = false;
    outage.refused('request', cause);
    expect(linesOf(logs, STARTED)).toHaveLength(2);
    outage.stop();
    expect(linesOf(logs, 'stopping while the database is unavailable')[0]).toMatchObject({
      level: 40,
      refused_requests: 1,
      refused_publishes: 0,
    });
  });

  it('says again, once per reminder interval, that a long outage goes on', async () => {
    const { logs, log } = capture('info');
    // Time as the outage log sees it: each probe takes 300 ms.
    let now = 0;
    let probes = 0;
    const outage = new DatabaseOutageLog({
      log,
      probe: async () => {
        probes++;
        now += 300;
        throw new Error('Connection terminated unexpectedly');
      },
      probeMs: 5,
      reminderMs: 1000,
      now: () => now,
    });
    outage.refused('request', new Error('Connection terminated unexpectedly'));
    await eventually(() => linesOf(logs, 'database still unavailable').length >= 2, 'two reminders', 60_000);
    outage.stop();
    const reminders = linesOf(logs, 'database still unavailable');
    // Every fourth probe (1,200 ms) is past the interval; the probes between write nothing.
    expect(probes).toBeGreaterThanOrEqual(8);
    expect(reminders.slice(0, 2).map((l) => [l.level, l.down_ms, l.refused_requests])).toEqual([
      [40, 1200, 1],
      [40, 2400, 1],
    ]);
    expect(reminders[0]!.err).toMatchObject({ message: 'Connection terminated unexpectedly' });
    expect(linesOf(logs, 'request refused: database unavailable')).toEqual([]); // debug, below info
  });
});

describe.each(DATABASES)('a /readyz the database fails on %s', (db) => {
  let t: TestCloud;
  beforeAll(async () => {
    t = await startTestCloud({ db });
  });
  afterAll(async () => t?.stop());

  it('is one outage in the log, not one error line per probe, and its end counts the refusals', async () => {
    const { db: kdb } = t.cloud.services.database;
    await sql`ALTER TABLE schema_migrations RENAME TO schema_migrations_away`.execute(kdb);
    let refused = 0;
    try {
      for (let i = 0; i < 5; i++) {
        const answer = await t.http.get('/readyz');
        expect([answer.status, answer.json.error.code]).toEqual([503, 'db_unavailable']);
        refused++;
      }
    } finally {
      await sql`ALTER TABLE schema_migrations_away RENAME TO schema_migrations`.execute(kdb);
    }
    // `SELECT 1` answers at once, so the outage may end between two probes on a slow machine: every
    // start has its end, and the ends count every refusal.
    const ended = await eventually(() => {
      const ends = linesOf(t.logs, ENDED);
      const counted = ends.reduce((n, l) => n + Number(l.refused_requests), 0);
      return counted === refused ? ends : null;
    }, 'the ends of the outage to count every refusal');
    const started = linesOf(t.logs, STARTED);
    expect(started).toHaveLength(ended.length);
    expect(started.length).toBeLessThanOrEqual(refused);
    expect(started[0]).toMatchObject({
      level: 50,
      module: 'database',
      req_id: expect.stringMatching(/^req_/),
    });
    expect(perRefusalErrors(t.logs)).toEqual([]);
    // The access log keeps its line for every refused request.
    const access = t.logs.filter((l) => l.msg === 'request' && l.url === '/readyz' && l.status === 503);
    expect(access).toHaveLength(refused);
    expect((await t.http.get('/readyz')).status).toBe(200);
  });
});

/**
 * A TCP proxy in front of PostgreSQL: `down()` cuts every connection and refuses new ones (as a
 * stopped server does), `up()` lets them through again.
 */
class PostgresProxy {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private isDown = false;

  constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((socket) => {
      if (this.isDown) {
        socket.destroy();
        return;
      }
      const upstream = net.connect(this.target.port, this.target.host);
      for (const s of [socket, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {
          socket.destroy();
          upstream.destroy();
        });
      }
      socket.pipe(upstream).pipe(socket);
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as net.AddressInfo).port;
  }

  down(): void {
    this.isDown = true;
    for (const s of this.sockets) s.destroy();
  }

  up(): void {
    this.isDown = false;
  }

  async close(): Promise<void> {
    this.down();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

// A real outage needs a database server to lose: registered where PostgreSQL is (TEST_DATABASE_URL;
// CI always sets it), as DATABASES does. SQLite is a file in the process and has no outage.
if (process.env.TEST_DATABASE_URL) {
  describe('a PostgreSQL outage under HTTP and MQTT ingest', () => {
    let td: TestDatabase;
    let proxy: PostgresProxy;
    let t: TestCloud;
    let user: SignedIn;
    let device: CreatedDevice;
    let bridge: BridgeBundle;
    beforeAll(async () => {
      td = testDatabase('postgres');
      const target = new URL(td.url);
      proxy = new PostgresProxy({ host: target.hostname, port: Number(target.port || 5432) });
      const proxied = new URL(td.url);
      proxied.hostname = '127.0.0.1';
      proxied.port = String(await proxy.listen());
      t = await startTestCloud({
        replicaOf: td,
        mqtt: true,
        env: { DATABASE_URL: proxied.toString(), LOG_LEVEL: 'info' },
      });
      user = await signUp(t, 'outage@example.com');
      const site = await createSite(t, user.token);
      device = await createDevice(t, user.token, site.id);
      bridge = await createBridge(t, user.token, site.id);
    }, 60_000);
    afterAll(async () => {
      proxy?.up();
      await t?.stop();
      await proxy?.close();
      await td?.dispose();
    }, 60_000);

    it('is logged once when it starts and once when it ends, with the requests and publishes refused', async () => {
      const client = await connectBridge(t, bridge);
      const reading = (value: number) => ({
        device: device.local_id,
        measurements: [{ type: 'temperature', value }],
      });
      // Over MQTT the topic names the device.
      const mqttReading = (value: number) => ({ measurements: [{ type: 'temperature', value }] });
      try {
        expect((await t.http.post('/v1/ingest', reading(4), { token: device.ingest_token })).status).toBe(
          200,
        );
        expect((await publish(client, `${bridge.topic_root}fridge`, mqttReading(4))).reasonCode).toBe(0);
        const before = t.logs.length;

        proxy.down();
        let refusedRequests = 0;
        let refusedPublishes = 0;
        for (let i = 0; i < 20; i++) {
          const ingest = await t.http.post('/v1/ingest', reading(5), { token: device.ingest_token });
          expect([ingest.status, ingest.json.error.code, ingest.headers.get('retry-after')]).toEqual([
            503,
            'db_unavailable',
            '2',
          ]);
          const sites = await t.http.get('/v1/sites', { token: user.token });
          expect([sites.status, sites.json.error.code]).toEqual([503, 'db_unavailable']);
          refusedRequests += 2;
          const ack = await publish(client, `${bridge.topic_root}fridge`, mqttReading(5));
          expect(ack.reasonCode).toBe(0x80);
          refusedPublishes++;
        }
        // A bridge that connects meanwhile is refused (server unavailable), not admitted unchecked.
        expect((await tryConnect(t, bridge)).outcome).not.toBe('connected');
        const during = t.logs.slice(before);
        expect(linesOf(during, STARTED)).toHaveLength(1);
        expect(linesOf(during, STARTED)[0]).toMatchObject({ level: 50, module: 'database' });
        expect(perRefusalErrors(during)).toEqual([]);
        expect(during.filter((l) => l.msg === 'request' && l.status === 503)).toHaveLength(refusedRequests);
        expect(linesOf(during, ENDED)).toEqual([]);

        proxy.up();
        const [ended] = await eventually(
          () => {
            const found = linesOf(t.logs.slice(before), ENDED);
            return found.length ? found : null;
          },
          'the end of the outage in the log',
          30_000,
        );
        expect(ended).toMatchObject({
          level: 40,
          module: 'database',
          refused_requests: refusedRequests,
          refused_publishes: refusedPublishes,
        });
        expect(Number(ended!.refused_connections)).toBeGreaterThanOrEqual(1);
        expect(linesOf(t.logs.slice(before), STARTED)).toHaveLength(1);

        // The same process takes readings again.
        await eventually(
          async () =>
            (await t.http.post('/v1/ingest', reading(6), { token: device.ingest_token })).status === 200,
          'ingest answering 200 again',
          30_000,
        );
        const again = await connectBridge(t, bridge);
        try {
          expect((await publish(again, `${bridge.topic_root}fridge`, mqttReading(6))).reasonCode).toBe(0);
        } finally {
          await closeClient(again);
        }
      } finally {
        await closeClient(client);
      }
    }, 120_000);
  });
}
