import { afterEach, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Connections, PIPELINE_DEPTH } from '../../../cloud/src/http/connections.ts';
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
  ) {
    const connections = new Connections({ maxPipelined });
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
    const request = (c: number, n: number) => `GET /${c}/${n} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;
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
    // Nothing is answered: only a closed connection can bring the count down.
    const { connections, port, serverSocket } = await serve(10, () => undefined);
    const get = (n: number) => Array(n).fill('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n').join('');
    const [a, b] = [new RawHttpConnection(port), new RawHttpConnection(port)];
    clients.push(a, b);
    await Promise.all([a.connected(), b.connected()]);
    a.write(get(30));
    await eventually(() => connections.pipelined === 29, 'the first connection to be read');
    b.write(get(3));
    const bServer = await eventually(() => serverSocket(b), 'the second connection');
    await eventually(() => connections.held === 33, 'the second connection to be read');
    expect(bServer.isPaused()).toBe(true);
    // The connection is lost (reset, say): its requests will never be answered.
    serverSocket(a)!.destroy();
    await eventually(() => connections.held === 3, 'the first connection to close');
    expect(bServer.isPaused()).toBe(false);
  });

  it('read a connection again once nothing of it is pipelined, while others keep the bound full', async () => {
    // `/stream` is never answered, as an event stream: what is pipelined behind it stays, and keeps
    // the process-wide bound full.
    const { connections, port } = await serve(10, (req, res) => {
      if (req.url !== '/stream') res.end(req.url);
    });
    const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;
    const [a, b] = [new RawHttpConnection(port), new RawHttpConnection(port)];
    clients.push(a, b);
    await Promise.all([a.connected(), b.connected()]);
    a.write(get('/stream') + Array.from({ length: 11 }, (_, i) => get(`/a${i}`)).join(''));
    await eventually(() => connections.pipelined === 11, 'the bound to be full');
    b.write(get('/b0') + get('/b1') + get('/b2'));
    await b.answered(3);
    b.write(get('/b3'));
    await eventually(() => b.answers.length === 4, "the fourth request's answer");
    expect(b.answers.map((x) => x.body)).toEqual(['/b0', '/b1', '/b2', '/b3']);
  });
});
