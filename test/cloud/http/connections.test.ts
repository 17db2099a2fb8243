import { afterEach, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { type ConnectionLimits, Connections, PIPELINE_DEPTH } from '../../../cloud/src/http/connections.ts';
import { eventually } from '../../helpers/eventually.ts';
import { RawHttpConnection } from '../../helpers/raw-http.ts';

/**
 * The process-wide bound on pipelined requests, on Node's own HTTP server (what the cloud's server
 * is) with `Connections` tracking it and a handler that holds every answer until released: the
 * requests read behind each connection's first unanswered one stay at most `maxPipelined` plus what
 * one read of each connection brings, where the per-connection depth alone would let each
 * connection reach PIPELINE_DEPTH. Once answers flow, every connection is read again and every
 * request answered, in order.
 */
const CONNECTIONS = 10;
const PER_CONNECTION = 150;
const MAX_PIPELINED = 100;
/** Requests a client writes at once; it writes the next batch once the server has read this one. */
const BATCH = 5;

describe('connections', () => {
  let server: http.Server | null = null;
  const clients: RawHttpConnection[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    server = null;
  });

  /**
   * Node's HTTP server on 127.0.0.1, port 0, with `Connections` tracking it and handing requests to
   * `handle`; `serverSocket` finds the server's side of a client's connection.
   */
  async function serve(
    maxPipelined: number,
    handle: (req: http.IncomingMessage, res: http.ServerResponse) => void,
    limits: ConnectionLimits = {},
  ) {
    const connections = new Connections({ maxPipelined, ...limits });
    const s = http.createServer();
    server = s;
    const byPort = new Map<number, Socket>();
    s.on('connection', (socket: Socket) => byPort.set(socket.remotePort!, socket));
    connections.track(s, handle);
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    const port = (s.address() as AddressInfo).port;
    const serverSocket = (client: RawHttpConnection) => byPort.get(client.socket.localPort!);
    return { connections, port, serverSocket };
  }

  /** A request for `path`, as a client writes it. */
  const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;

  /** `n` requests `GET /<c>/<from>`, `GET /<c>/<from + 1>`, ... as a client pipelines them, in one string. */
  const pipeline = (c: number, from: number, n: number) =>
    Array.from({ length: n }, (_, i) => get(`/${c}/${from + i}`)).join('');

  /** `n` connections to `port`, connected. */
  async function open(port: number, n: number): Promise<RawHttpConnection[]> {
    const opened = Array.from({ length: n }, () => new RawHttpConnection(port));
    clients.push(...opened);
    await Promise.all(opened.map((c) => c.connected()));
    return opened;
  }

  /** A server with a bound of ten that answers every request at once but `/stream`, never answered (an event stream). */
  const serveStreams = (limits: ConnectionLimits) =>
    serve(
      10,
      (req, res) => {
        if (req.url !== '/stream') res.end(req.url);
      },
      limits,
    );

  /** Fills the bound of ten for good: a stream on `client` and eleven requests pipelined behind it. */
  async function fillBound(connections: Connections, client: RawHttpConnection): Promise<void> {
    client.write(get('/stream') + Array.from({ length: 11 }, (_, i) => get(`/a${i}`)).join(''));
    await eventually(() => connections.pipelined === 11, 'the bound to be full');
  }

  /**
   * A server with a bound of ten that never answers `/stream` nor `/a…` (what is pipelined behind a
   * stream), holds the answers to `/b…` until `release()` and answers them at once after, and
   * answers anything else at once.
   */
  async function serveHoldingB(limits: ConnectionLimits) {
    const held: (() => void)[] = [];
    let holding = true;
    const served = await serve(
      10,
      (req, res) => {
        if (req.url === '/stream' || req.url!.startsWith('/a')) return;
        if (holding && req.url!.startsWith('/b')) held.push(() => res.end(req.url));
        else res.end(req.url);
      },
      limits,
    );
    const release = () => {
      holding = false;
      for (const answer of held.splice(0)) answer();
    };
    return { ...served, release };
  }

  /** `n` connections to `port`, opened one after the other, each handed to `each` once connected. */
  async function connectAll(
    port: number,
    n: number,
    each: (client: RawHttpConnection, c: number) => Promise<void> | void,
  ): Promise<RawHttpConnection[]> {
    const opened: RawHttpConnection[] = [];
    for (let c = 0; c < n; c++) {
      const client = new RawHttpConnection(port);
      clients.push(client);
      opened.push(client);
      await client.connected();
      await each(client, c);
    }
    return opened;
  }

  it(`hold at most ${MAX_PIPELINED} pipelined requests in all (and one read per connection), then answer every one in order`, async () => {
    const read = new Map<number, number>();
    let released = false;
    const waiting: (() => void)[] = [];
    let mostPipelined = 0;
    const { connections, port, serverSocket } = await serve(MAX_PIPELINED, (req, res) => {
      const from = req.socket.remotePort!;
      read.set(from, (read.get(from) ?? 0) + 1);
      mostPipelined = Math.max(mostPipelined, connections.pipelined);
      const answer = () => res.end(req.url);
      if (released) answer();
      else waiting.push(answer);
    });
    const request = (c: number, n: number) => get(`/${c}/${n}`);
    const sent: number[] = [];
    for (let c = 0; c < CONNECTIONS; c++) {
      const client = new RawHttpConnection(port);
      await client.connected();
      clients.push(client);
      sent.push(0);
    }

    // Each client writes a batch once the server has read its last one, until the server stops
    // reading it: so that each read of the server holds one batch.
    const stopped = new Set<number>();
    while (stopped.size < CONNECTIONS) {
      for (let c = 0; c < CONNECTIONS; c++) {
        if (stopped.has(c)) continue;
        const port = clients[c]!.socket.localPort!;
        await eventually(
          () => (read.get(port) ?? 0) === sent[c] || serverSocket(clients[c]!)?.isPaused(),
          `connection ${c} to be read or paused`,
        );
        if ((read.get(port) ?? 0) < sent[c]! || sent[c] === PER_CONNECTION) {
          stopped.add(c);
          continue;
        }
        const batch = Array.from({ length: BATCH }, (_, i) => request(c, sent[c]! + i)).join('');
        clients[c]!.write(batch);
        sent[c]! += BATCH;
      }
    }
    expect(connections.pauses).toBeGreaterThan(0);
    expect(mostPipelined).toBeGreaterThan(MAX_PIPELINED);
    expect(mostPipelined).toBeLessThanOrEqual(MAX_PIPELINED + CONNECTIONS * BATCH);
    // The per-connection depth alone would have allowed far more.
    expect(CONNECTIONS * (PIPELINE_DEPTH - 1)).toBeGreaterThan(MAX_PIPELINED + CONNECTIONS * BATCH);

    released = true;
    for (const answer of waiting.splice(0)) answer();
    for (let c = 0; c < CONNECTIONS; c++) {
      const rest = Array.from({ length: PER_CONNECTION - sent[c]! }, (_, i) => request(c, sent[c]! + i));
      clients[c]!.write(rest.join(''));
    }
    for (let c = 0; c < CONNECTIONS; c++) {
      await clients[c]!.answered(PER_CONNECTION);
      expect(clients[c]!.answers.map((a) => a.body)).toEqual(
        Array.from({ length: PER_CONNECTION }, (_, n) => `/${c}/${n}`),
      );
    }
    expect(connections.held).toBe(0);
    expect(connections.pipelined).toBe(0);
  });

  it('read a paused connection again when the pipelined requests fall because another connection closed', async () => {
    // Nothing is answered: only a closed connection can bring the count down. The first connection's
    // one read goes past twice the bound, which would close it: that bound is out of reach here.
    const { connections, port, serverSocket } = await serve(10, () => undefined, { cutPipelined: 1000 });
    const gets = (n: number) => Array(n).fill(get('/')).join('');
    const [a, b] = (await open(port, 2)) as [RawHttpConnection, RawHttpConnection];
    a.write(gets(30));
    await eventually(() => connections.pipelined === 29, 'the first connection to be read');
    b.write(gets(3));
    const bServer = await eventually(() => serverSocket(b), 'the second connection');
    await eventually(() => connections.held === 33, 'the second connection to be read');
    expect(bServer.isPaused()).toBe(true);
    // The connection is lost (reset, say): its requests will never be answered.
    serverSocket(a)!.destroy();
    await eventually(() => connections.held === 3, 'the first connection to close');
    expect(bServer.isPaused()).toBe(false);
  });

  it('read a connection waiting for room all the same once it has waited readyMaxWaitMs, while others keep the bound full', async () => {
    // `/stream` is never answered, as an event stream: what is pipelined behind it stays, and keeps
    // the process-wide bound full, so room never comes.
    const { connections, port } = await serveStreams({ readyMaxWaitMs: 300 });
    const [a, b] = (await open(port, 2)) as [RawHttpConnection, RawHttpConnection];
    await fillBound(connections, a);
    b.write(get('/b0') + get('/b1') + get('/b2'));
    await b.answered(3);
    const waitedFrom = performance.now();
    b.write(get('/b3'));
    await eventually(() => b.answers.length === 4, "the fourth request's answer");
    expect(performance.now() - waitedFrom).toBeGreaterThanOrEqual(200);
    expect(b.answers.map((x) => x.body)).toEqual(['/b0', '/b1', '/b2', '/b3']);
  });

  it("read an idle connection waiting for room before Node's keep-alive timeout would close it with a request unread", async () => {
    // The bound stays full behind an event stream (never answered), so room never comes, and the
    // wait for room alone (readyMaxWaitMs) outlasts the keep-alive timeout, which counts from the
    // idle connection's last answer. Closed then, the request its client sent meanwhile is lost.
    const { connections, port } = await serveStreams({ readyMaxWaitMs: 20_000 });
    server!.keepAliveTimeout = 1500;
    const [p, a] = (await open(port, 2)) as [RawHttpConnection, RawHttpConnection];
    // p pipelines (so the bound pauses it), is answered, and is idle from here.
    p.write(get('/p0') + get('/p1') + get('/p2'));
    await p.answered(3);
    await fillBound(connections, a);
    p.write(get('/p3'));
    let closed = false;
    void p.closed.then(() => (closed = true));
    await eventually(() => p.answers.length === 4 || closed, 'the idle connection read or closed');
    expect(closed).toBe(false);
    expect(p.answers.map((x) => x.body)).toEqual(['/p0', '/p1', '/p2', '/p3']);
  });

  it('count the wait for room from when a connection stopped being read, its wait for its own answers included', async () => {
    // b pipelines past its depth and is paused for it (the bound is not passed before); its answers
    // are held for 1.5 s while the bound stays full behind an event stream, so that, once they are
    // out, only readyMaxWaitMs reads it again. Counted from the pause it is read 2 s after it;
    // counted from its answers, 3.5 s.
    const { connections, port, release } = await serveHoldingB({ depth: 4, readyMaxWaitMs: 2000 });
    const [a, b] = (await open(port, 2)) as [RawHttpConnection, RawHttpConnection];
    // Six pipelined behind the stream: b's fourth pipelined request (its fifth, past its depth of
    // four) reaches the bound of ten without passing it, and once b's own are answered the six
    // leave room for fewer than one read of b (five, half the bound).
    a.write(get('/stream') + Array.from({ length: 6 }, (_, i) => get(`/a${i}`)).join(''));
    await eventually(() => connections.pipelined === 6, "a's requests read");
    b.write(Array.from({ length: 8 }, (_, i) => get(`/b${i}`)).join(''));
    await eventually(() => connections.held === 15, "b's requests read");
    expect(connections.pipelined).toBe(13);
    const pausedAt = performance.now();
    b.write(get('/b8'));
    await new Promise((resolve) => setTimeout(resolve, 1500));
    release();
    await b.answered(9);
    const waited = performance.now() - pausedAt;
    expect(b.answers.map((x) => x.body)).toEqual(Array.from({ length: 9 }, (_, i) => `/b${i}`));
    expect(waited).toBeGreaterThanOrEqual(1900);
    expect(waited).toBeLessThan(3000);
  });

  it('keep a connection paused mid-read past half its depth from being read again until its own answers are out', async () => {
    // b's one read passes the bound at its second request, so b waits for room; the rest of the same
    // read takes it to twelve unanswered, three times its depth. Read again then (here at
    // readyMaxWaitMs, as room never comes), it would read twelve more while holding its twelve.
    const { connections, port, release } = await serveHoldingB({
      depth: 4,
      readyMaxWaitMs: 300,
      cutPipelined: 1000,
    });
    const [a, b, c] = (await open(port, 3)) as [RawHttpConnection, RawHttpConnection, RawHttpConnection];
    a.write(get('/stream') + Array.from({ length: 10 }, (_, i) => get(`/a${i}`)).join(''));
    await eventually(() => connections.pipelined === 10, 'the bound to be reached');
    b.write(Array.from({ length: 12 }, (_, i) => get(`/b${i}`)).join(''));
    await eventually(() => connections.held === 23, "b's first read");
    b.write(Array.from({ length: 12 }, (_, i) => get(`/b${12 + i}`)).join(''));
    // Past readyMaxWaitMs, and then c (a device) read and answered: the event loop has been round.
    await new Promise((resolve) => setTimeout(resolve, 500));
    c.write(get('/c'));
    await c.answered(1);
    for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(connections.held).toBe(23);
    release();
    await b.answered(24);
    expect(b.answers.map((x) => x.body)).toEqual(Array.from({ length: 24 }, (_, i) => `/b${i}`));
  });

  it('take the connection idle longest for a new one at the limit, not one read again after waiting for room', async () => {
    // p and then q go idle; p, which has pipelined, waits for room behind a full bound and is read
    // again at readyMaxWaitMs. A fourth connection at a limit of three then takes q, idle longest.
    const { connections, port } = await serveStreams({ readyMaxWaitMs: 200, maxConnections: 3 });
    const [p, q, a] = (await open(port, 3)) as [RawHttpConnection, RawHttpConnection, RawHttpConnection];
    p.write(get('/p0') + get('/p1'));
    await p.answered(2);
    q.write(get('/q0'));
    await q.answered(1);
    const qIdleAt = performance.now();
    await fillBound(connections, a);
    await eventually(() => connections.pauses >= 2, 'p and a to be paused');
    // q idle for over RECLAIM_IDLE_MS; p read again well within it.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, qIdleAt + 1100 - performance.now())));
    const n = new RawHttpConnection(port);
    clients.push(n);
    await n.connected();
    n.write(get('/n0'));
    await n.answered(1);
    expect(n.answers[0]!.status).toBe(200);
    await q.closed;
    expect(connections.reclaimed).toBe(1);
    expect(connections.refused).toBe(0);
  });

  it('read paused connections again only as far as room under the bound allows', async () => {
    // Twenty connections each pipeline 70 requests at once, twice. The first reads go past the bound
    // (a new connection is read before anything can be paused) and past each connection's depth, so
    // every one is paused; nothing is answered until all have been read and the second seventy wait
    // unread. Then answers flow at a steady pace, oldest first, as from a busy server: each paused
    // connection is read again only once the pipelined requests leave room for the seventy it
    // brought last time, not as soon as its own answers are out.
    const CONNS = 20;
    const DEEP = 70;
    let released = false;
    const waiting: (() => void)[] = [];
    let mostAfterRelease = 0;
    const { connections, port } = await serve(
      MAX_PIPELINED,
      (req, res) => {
        if (released) mostAfterRelease = Math.max(mostAfterRelease, connections.pipelined);
        waiting.push(() => res.end(req.url));
      },
      { cutPipelined: 100_000 },
    );
    const conns = await connectAll(port, CONNS, (client, c) => client.write(pipeline(c, 0, DEEP)));
    await eventually(() => connections.held === CONNS * DEEP, 'every first read');
    expect(connections.pipelined).toBeGreaterThan(MAX_PIPELINED);
    for (const [c, client] of conns.entries()) client.write(pipeline(c, DEEP, DEEP));
    released = true;
    const drip = setInterval(() => {
      for (const answer of waiting.splice(0, 10)) answer();
    }, 1);
    try {
      for (const client of conns) await client.answered(2 * DEEP);
    } finally {
      clearInterval(drip);
    }
    for (const [c, client] of conns.entries()) {
      expect(client.answers.map((a) => a.body)).toEqual(
        Array.from({ length: 2 * DEEP }, (_, n) => `/${c}/${n}`),
      );
    }
    // Everything read again after the release was read into room: at most the bound, and one
    // connection's read more where a read brought more than expected (a read can end mid-pipeline).
    expect(mostAfterRelease).toBeLessThanOrEqual(MAX_PIPELINED + DEEP);
    expect(connections.held).toBe(0);
    expect(connections.pipelined).toBe(0);
  });

  it('past the bound, stop reading every pipelining connection at once, not each as its own next read comes', async () => {
    // Fifty connections that have pipelined (two requests each, held) then each write a hundred more
    // in the same tick, so that the server has all fifty reads ready in one turn of its event loop.
    // The first reads take the pipelined requests past the bound; the rest are never made.
    const CONNS = 50;
    const BOUND = 1000;
    let most = 0;
    const { connections, port } = await serve(
      BOUND,
      () => void (most = Math.max(most, connections.pipelined)),
      {
        cutPipelined: 1_000_000,
      },
    );
    const conns = await connectAll(port, CONNS, (client, c) => client.write(pipeline(c, 0, 2)));
    await eventually(() => connections.held === 2 * CONNS, 'every connection to pipeline');
    for (const [c, client] of conns.entries()) client.write(pipeline(c, 2, 100));
    await eventually(() => connections.pipelined > BOUND, 'the bound to be passed');
    // Two more turns of the event loop: every read it had ready would have been made by then.
    for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
    // Past the bound by the reads made before it was passed and the one that passed it, at most.
    expect(most).toBeLessThanOrEqual(BOUND + 2 * 100);
    expect(connections.held).toBeLessThan(2 * CONNS + 15 * 100);
  });

  it('close a connection whose read brings a pipelined request past twice the bound, and hold no more', async () => {
    // Ten new connections each pipeline 100 requests in one write, and nothing is answered until all
    // are read or closed: a new connection is read before it can be paused, so only the cut bounds it.
    const CONNS = 10;
    const DEEP = 100;
    let released = false;
    const waiting: (() => void)[] = [];
    let mostPipelined = 0;
    const { connections, port } = await serve(MAX_PIPELINED, (req, res) => {
      mostPipelined = Math.max(mostPipelined, connections.pipelined);
      const answer = () => res.end(req.url);
      if (released) answer();
      else waiting.push(answer);
    });
    const conns = await connectAll(port, CONNS, async (client, c) => {
      client.write(pipeline(c, 0, DEEP));
      // Each read whole before the next connection sends: which connections go past is then known.
      await eventually(
        () => (c < 2 ? connections.held === (c + 1) * DEEP : connections.cuts === c - 1),
        `connection ${c} read`,
      );
    });
    expect(mostPipelined).toBeLessThanOrEqual(2 * MAX_PIPELINED);
    expect(connections.cuts).toBe(CONNS - 2);
    expect(connections.pipelined).toBeLessThanOrEqual(2 * MAX_PIPELINED);
    released = true;
    for (const answer of waiting.splice(0)) answer();
    for (const [c, client] of conns.entries()) {
      if (c < 2) {
        // The first two fit under twice the bound: every request answered, in order.
        await client.answered(DEEP);
        expect(client.answers.map((a) => a.body)).toEqual(
          Array.from({ length: DEEP }, (_, n) => `/${c}/${n}`),
        );
      } else {
        // Closed: nothing of it answered, and it knows.
        await client.closed;
        expect(client.answers).toEqual([]);
      }
    }
    await eventually(() => connections.held === 0, 'every request forgotten');
    expect(connections.pipelined).toBe(0);
  });
});
