import net from 'node:net';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { sql } from 'kysely';
import { Health } from '../../../cloud/src/health/health.service.ts';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, type TestDatabase } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createDevice, createSite } from '../../helpers/fixtures.ts';
import { HttpClient } from '../../helpers/http.ts';
import { spawnCloud, type CloudProcess } from '../../helpers/process.ts';

/** The database URL a spawned process uses to reach the test's own database (its schema on PostgreSQL). */
function processDatabaseUrl(database: TestDatabase): string {
  if (!database.schema) return database.url;
  const url = new URL(database.url);
  url.searchParams.set('options', `-c search_path=${database.schema}`);
  return url.toString();
}

/** A GET on a new connection (no keep-alive pool): refused once the listener is closed. */
function freshGet(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
  });
}

describe.each(DATABASES)('health checks (%s)', (db) => {
  let t: TestCloud;
  beforeAll(async () => {
    t = await startTestCloud({ db });
  });
  afterAll(async () => t.stop());

  it('answers /healthz and /readyz with 200 without credentials', async () => {
    const live = await t.http.get('/healthz');
    expect([live.status, live.json]).toEqual([200, { status: 'ok' }]);
    const ready = await t.http.get('/readyz');
    expect([ready.status, ready.json]).toEqual([200, { status: 'ready' }]);
    expect(ready.headers.get('cache-control')).toBe('no-store');
  });

  it('is not ready until the process has started everything it listens with (the MQTT bridge too)', async () => {
    // A Health as a process holds it between opening its HTTP port and the end of its start.
    const starting = new Health({ db: t.cloud.services.db });
    await expect(starting.ready()).rejects.toThrow('the process is starting');
    starting.markStarted();
    await expect(starting.ready()).resolves.toBeUndefined();
  });

  it('answers /readyz with 503 not_ready while a migration of this build is not applied', async () => {
    const { db: kdb } = t.cloud.services.database;
    const last = await sql<{ name: string; applied_at: number }>`
      SELECT name, applied_at FROM schema_migrations ORDER BY name DESC LIMIT 1`.execute(kdb);
    const row = last.rows[0]!;
    await sql`DELETE FROM schema_migrations WHERE name = ${row.name}`.execute(kdb);
    try {
      const answer = await t.http.get('/readyz');
      expect(answer.status).toBe(503);
      expect(answer.json.error.code).toBe('not_ready');
      expect(answer.json.error.message).toContain(row.name);
      expect(answer.json.error.request_id).toMatch(/^req_/);
      // An answer the balancer asks for every few seconds: the access log's line, no error line.
      const lines = t.logs.filter((l) => l.req_id === answer.json.error.request_id);
      expect(lines.map((l) => [l.level, l.msg])).toEqual([[30, 'request']]);
      expect((await t.http.get('/healthz')).status).toBe(200);
    } finally {
      await sql`INSERT INTO schema_migrations (name, applied_at) VALUES (${row.name}, ${row.applied_at})`.execute(
        kdb,
      );
    }
    expect((await t.http.get('/readyz')).status).toBe(200);
  });

  it("answers /readyz with 503 db_unavailable when the database's answer fails", async () => {
    const { db: kdb } = t.cloud.services.database;
    await sql`ALTER TABLE schema_migrations RENAME TO schema_migrations_away`.execute(kdb);
    try {
      const answer = await t.http.get('/readyz');
      expect([answer.status, answer.json.error.code]).toEqual([503, 'db_unavailable']);
    } finally {
      await sql`ALTER TABLE schema_migrations_away RENAME TO schema_migrations`.execute(kdb);
    }
    expect((await t.http.get('/readyz')).status).toBe(200);
  });
});

describe.each(DATABASES)('draining on SIGTERM (%s)', (db) => {
  let proc: CloudProcess | null = null;
  let setup: TestCloud;
  afterAll(async () => {
    if (proc && proc.child.exitCode === null && proc.child.signalCode === null) {
      proc.child.kill('SIGKILL');
      await proc.exited;
    }
    await setup?.database.dispose();
  });

  it('answers /readyz 503 at once, serves on through the drain, finishes in-flight requests, then refuses', async () => {
    // One device, made through an in-process cloud on the database the spawned process will use.
    const keep = await startTestCloud({ db });
    const user = await signUp(keep, 'ops@example.com');
    const site = await createSite(keep, user.token);
    const device = await createDevice(keep, user.token, site.id, { local_id: 'probe' });
    setup = keep;
    await keep.cloud.stop();

    proc = await spawnCloud({
      DATA_DIR: setup.database.dataDir,
      DATABASE_URL: processDatabaseUrl(setup.database),
      // Long enough for the checks below to reach the draining process on a slow machine.
      SHUTDOWN_DRAIN_MS: '3000',
    });
    const client = new HttpClient(proc.url);
    expect((await client.get('/readyz')).status).toBe(200);

    // A request in flight when the signal comes: its body is only half sent.
    const body = JSON.stringify({
      device: 'probe',
      ts: '2026-01-01T00:00:00Z',
      measurements: [{ type: 'temperature', value: 21.5 }],
    });
    const inFlight = http.request({
      host: '127.0.0.1',
      port: proc.port,
      path: '/v1/ingest',
      method: 'POST',
      agent: false,
      headers: {
        Authorization: `Bearer ${device.ingest_token}`,
        'Content-Type': 'application/json',
        'Content-Length': String(Buffer.byteLength(body)),
      },
    });
    const inFlightStatus = new Promise<number>((resolve, reject) => {
      inFlight.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      inFlight.on('error', reject);
    });
    inFlight.write(body.slice(0, 10));
    inFlight.flushHeaders();

    proc.child.kill('SIGTERM');
    // Draining: not ready, yet still serving new connections.
    const notReady = await eventually(async () => {
      const a = await client.get('/readyz');
      return a.status === 503 ? a : null;
    }, 'readyz to answer 503');
    expect(notReady.json.error.code).toBe('not_ready');
    expect(await freshGet(proc.port, '/healthz')).toBe(200);

    // The listener closes after the drain delay; the half-sent request still completes.
    await eventually(
      () =>
        freshGet(proc!.port, '/healthz').then(
          () => false,
          (err: NodeJS.ErrnoException) => err.code === 'ECONNREFUSED',
        ),
      'the listener to close',
      30_000,
    );
    inFlight.end(body.slice(10));
    expect(await inFlightStatus).toBe(200);
    expect(await proc.exited).toBe(0);
  });
});

describe.each(DATABASES)('stopping with a keep-alive request in flight (%s)', (db) => {
  it('answers the request, then closes its connection at once instead of after the keep-alive timeout', async () => {
    const t = await startTestCloud({ db });
    const user = await signUp(t, 'keepalive@example.com');
    const site = await createSite(t, user.token);
    const device = await createDevice(t, user.token, site.id, { local_id: 'probe' });
    const body = JSON.stringify({
      device: 'probe',
      ts: '2026-01-01T00:00:00Z',
      measurements: [{ type: 'temperature', value: 21.5 }],
    });
    // A client that keeps its connection for reuse, as fetch, HAProxy and gateways do.
    const agent = new http.Agent({ keepAlive: true, keepAliveMsecs: 120_000 });
    const inFlight = http.request({
      host: '127.0.0.1',
      port: new URL(t.url).port,
      path: '/v1/ingest',
      method: 'POST',
      agent,
      headers: {
        Authorization: `Bearer ${device.ingest_token}`,
        'Content-Type': 'application/json',
        'Content-Length': String(Buffer.byteLength(body)),
        // The server's 100 Continue says it has parsed the headers and handed the request on.
        Expect: '100-continue',
      },
    });
    const answered = new Promise<number>((resolve, reject) => {
      inFlight.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      inFlight.on('error', reject);
    });
    const socketClosed = new Promise<void>((resolve) =>
      inFlight.on('socket', (socket) => socket.once('close', () => resolve())),
    );
    inFlight.flushHeaders();
    await new Promise<void>((resolve) => inFlight.once('continue', () => resolve()));
    inFlight.write(body.slice(0, 10));
    const stopped = t.stop();
    const port = Number(new URL(t.url).port);
    await eventually(
      () =>
        freshGet(port, '/healthz').then(
          () => false,
          (err: NodeJS.ErrnoException) => err.code === 'ECONNREFUSED',
        ),
      'the listener to close',
      30_000,
    );
    inFlight.end(body.slice(10));
    expect(await answered).toBe(200);
    // Without the close, the server would keep the idle connection for its 65 s keep-alive timeout
    // and the stop would wait for it, past this test's 30 s.
    await socketClosed;
    await stopped;
    agent.destroy();
  });
});

describe.each(DATABASES)('stopping with a connection that has sent nothing yet (%s)', (db) => {
  it('closes it at once instead of waiting for its headers', async () => {
    const t = await startTestCloud({ db });
    // A client that connected (as a pool or an event source reconnecting does) and sent no request.
    const socket = net.connect(Number(new URL(t.url).port), '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    // Without the close the stop would wait for the connection's timeouts, past this test's 30 s.
    await t.stop();
    await closed;
  });
});
