import { afterEach, describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { RECLAIM_IDLE_MS, REFUSED_LINGER_MS } from '../../../cloud/src/http/connections.ts';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createDevice, createSite, measurementCount } from '../../helpers/fixtures.ts';
import { RawHttpConnection } from '../../helpers/raw-http.ts';

/**
 * HTTP_MAX_CONNECTIONS: at the limit a new connection first takes the place of the keep-alive one
 * idle longest (idle RECLAIM_IDLE_MS at least: the waits below are that threshold, not a guess);
 * where every open connection has a request in progress, it is answered 503 `overloaded` with
 * Retry-After in the API's envelope, its request is never handled (nothing of it is stored), and it
 * is closed, at once if it sends a second request. Once a connection frees up, new ones are served
 * again.
 */
const LIMIT = 4;

describe.each(DATABASES)('the connection limit on %s', (db) => {
  let t: TestCloud | null = null;
  const clients: RawHttpConnection[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await t?.stop();
    t = null;
  });

  it(`makes room by closing idle connections, and answers 503 overloaded past ${LIMIT} busy ones`, async () => {
    const cloud = await startTestCloud({ db, env: { HTTP_MAX_CONNECTIONS: String(LIMIT) } });
    t = cloud;
    const user = await signUp(cloud, 'connections@example.com');
    const site = await createSite(cloud, user.token);
    const device = await createDevice(cloud, user.token, site.id, { local_id: 'c1' });
    const port = Number(new URL(cloud.url).port);
    const open = async () => {
      const c = new RawHttpConnection(port);
      clients.push(c);
      await c.connected();
      return c;
    };
    const ingest = (second: number) => {
      const body = JSON.stringify({
        device: 'c1',
        ts: new Date(Date.UTC(2026, 0, 1, 0, 0, second)).toISOString(),
        measurements: [{ type: 'temperature', value: 20 }],
      });
      const head =
        `POST /v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${device.ingest_token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
      return { head, body };
    };
    const healthz = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';

    // LIMIT idle keep-alive connections, then LIMIT more: each new one closes the oldest idle one.
    await sleep(RECLAIM_IDLE_MS); // the set-up's own connections are idle long enough to be taken
    const idle: RawHttpConnection[] = [];
    for (let i = 0; i < LIMIT; i++) {
      const c = await open();
      c.write(healthz);
      await c.answered(1);
      idle.push(c);
    }
    await sleep(RECLAIM_IDLE_MS);
    // Each busy connection has a request whose body is not all sent: in progress, not idle.
    const busy: { c: RawHttpConnection; body: string }[] = [];
    for (let i = 0; i < LIMIT; i++) {
      const c = await open();
      const { head, body } = ingest(i);
      c.write(head + body.slice(0, 10));
      await eventually(() => cloud.cloud.connections.held === i + 1, `busy connection ${i} to be read`);
      busy.push({ c, body });
    }
    await Promise.all(idle.map((c) => c.closed));
    expect(cloud.cloud.connections.reclaimed).toBeGreaterThanOrEqual(LIMIT);
    expect(cloud.cloud.connections.count).toBe(LIMIT);

    // Every open connection is busy: the next is refused, and its request never handled. A client
    // that goes on sending on it has it closed at its second request.
    const refused = new RawHttpConnection(port, { allowHalfOpen: true });
    clients.push(refused);
    await refused.connected();
    const { head, body } = ingest(59);
    refused.write(head + body);
    await refused.answered(1);
    expect(cloud.cloud.connections.refusedOpen).toBe(1);
    refused.write(head + body);
    await eventually(
      () => cloud.cloud.connections.refusedOpen === 0,
      'the refused connection to be closed at its second request',
      REFUSED_LINGER_MS - 500, // before the linger timer would close it anyway
    );
    const answer = refused.answers[0]!;
    expect(answer.status).toBe(503);
    expect(answer.headers['retry-after']).toBe('1');
    expect(answer.headers.connection).toBe('close');
    expect(answer.headers['cache-control']).toBe('no-store');
    expect(Number.isNaN(Date.parse(answer.headers.date ?? ''))).toBe(false);
    expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
    const error = (JSON.parse(answer.body) as { error: { code: string; request_id: string } }).error;
    expect(error.code).toBe('overloaded');
    expect(error.request_id).toMatch(/^req_/);
    expect(answer.headers['x-request-id']).toBe(error.request_id);
    expect(cloud.cloud.connections.refused).toBe(1);

    // The busy requests finish and are stored; the refused one was never read.
    for (const { c, body } of busy) c.write(body.slice(10));
    for (const { c } of busy) await c.answered(1);
    expect(busy.map(({ c }) => c.answers[0]!.status)).toEqual(Array(LIMIT).fill(200));
    expect(await measurementCount(cloud)).toBe(LIMIT);

    // The busy connections are idle again: a new one takes an idle one's place and is served.
    await sleep(RECLAIM_IDLE_MS);
    const next = await open();
    next.write(healthz);
    await next.answered(1);
    expect(next.answers[0]!.status).toBe(200);
    const metrics = await cloud.http.get('/metrics');
    expect(metrics.text).toMatch(/^sm_http_connections_refused_total 1$/m);
    expect(metrics.text).toMatch(/^sm_http_connections_reclaimed_total [1-9]/m);
  });
});
