import { afterEach, describe, expect, it } from '@jest/globals';
import { PIPELINE_DEPTH } from '../../../cloud/src/http/connections.ts';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { RawHttpConnection } from '../../helpers/raw-http.ts';
import { createDevice, createSite, measurementCount } from '../../helpers/fixtures.ts';
import { holdIngestWrites } from '../../helpers/row-locks.ts';

/**
 * A client that pipelines: HTTP/1.1 answers a connection's requests in order, so everything the
 * server reads behind a request still waiting for its ingest group stays in memory until that one
 * is answered. The server stops reading from a connection with more than PIPELINE_DEPTH requests
 * unanswered and goes on once half are answered: what it holds for one connection is bounded, and
 * every request is still answered, in order, and stored. Every tenth request is a `GET /healthz`,
 * answered at once behind the ones waiting for their group: each such answer makes Node resume the
 * connection by itself, and the bound must hold all the same. On PostgreSQL the cloud's writes are
 * held meanwhile, so that nothing is written until the bound has been reached and checked.
 */
const REQUESTS = 3000;

describe.each(DATABASES)('a pipelining client on %s', (db) => {
  let t: TestCloud | null = null;
  afterEach(async () => {
    await t?.stop();
    t = null;
  });

  it(`is read no further than ${PIPELINE_DEPTH} unanswered requests (and one read more), and every request is answered in order`, async () => {
    // One device sends them all: its rate limit must not refuse any. Admission control must not
    // either: the writes held below (and a slow CI machine) keep the first group waiting for
    // seconds, past INGEST_MAX_WAIT_MS's default, and what is read meanwhile would be shed with 503.
    const cloud = await startTestCloud({
      db,
      env: { RATE_LIMIT_INGEST_PER_MIN: String(REQUESTS), INGEST_MAX_WAIT_MS: '600000' },
    });
    t = cloud;
    const user = await signUp(cloud, 'pipelining@example.com');
    const site = await createSite(cloud, user.token);
    const device = await createDevice(cloud, user.token, site.id, { local_id: 'p1' });
    const health = (i: number) => i % 10 === 9;
    const requests = Array.from({ length: REQUESTS }, (_, i) => {
      if (health(i)) return 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
      const body = JSON.stringify({
        device: 'p1',
        ts: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(),
        measurements: [{ type: 'temperature', value: i % 40 }],
      });
      return (
        `POST /v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${device.ingest_token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
      );
    });
    // The most requests one read of the server (64 KiB) can hold, on top of the depth: the most
    // requests starting within any 64 KiB of the stream, and the one it cuts at its start.
    const starts: number[] = [];
    requests.reduce((at, r) => (starts.push(at), at + Buffer.byteLength(r)), 0);
    let perRead = 0;
    for (let i = 0, j = 0; i < starts.length; i++) {
      while (j < starts.length && starts[j]! < starts[i]! + 65536) j++;
      perRead = Math.max(perRead, j - i + 1);
    }
    let mostHeld = 0;
    cloud.cloud['server']!.on('request', () => {
      mostHeld = Math.max(mostHeld, cloud.cloud.connections.held);
    });

    const release = db === 'postgres' ? await holdIngestWrites(cloud.database) : null;
    const client = new RawHttpConnection(Number(new URL(cloud.url).port));
    try {
      client.write(requests.join(''));
      await eventually(() => cloud.cloud.connections.pauses > 0, 'the connection to be paused');
      if (release) {
        // Nothing can be answered while the first request's write is held: the count read so far is final.
        expect(client.answers).toEqual([]);
        expect(cloud.cloud.connections.held).toBeLessThan(REQUESTS);
      }
    } finally {
      await release?.();
    }
    await client.answered(REQUESTS);
    client.close();
    const statuses = client.answers.map((a) => a.status);
    expect(mostHeld).toBeGreaterThan(PIPELINE_DEPTH);
    expect(mostHeld).toBeLessThanOrEqual(PIPELINE_DEPTH + perRead);
    expect(statuses).toEqual(Array(REQUESTS).fill(200));
    expect(await measurementCount(cloud)).toBe(REQUESTS - REQUESTS / 10);
    const metrics = await cloud.http.get('/metrics');
    expect(metrics.text).toMatch(/^sm_http_pipelining_pauses_total [1-9]/m);
    expect(metrics.text).toMatch(/^sm_http_requests_held \d+/m);
    expect(metrics.text).toMatch(/^sm_http_requests_pipelined \d+/m);
    expect(metrics.text).toMatch(/^sm_http_connections [1-9]/m);
  });
});
