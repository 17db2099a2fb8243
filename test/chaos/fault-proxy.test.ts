import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { FaultProxy } from '../../scripts/chaos/fault-proxy.ts';
import { eventually } from '../helpers/eventually.ts';

/**
 * The chaos scenarios' fault-injecting TCP proxy (scripts/chaos/fault-proxy.ts), between a real
 * client and a real server on 127.0.0.1: what each mode does to bytes, closes and new connections.
 */

interface Peer {
  socket: net.Socket;
  received: () => Buffer;
  closed: Promise<'reset' | 'closed'>;
}

function peer(socket: net.Socket): Peer {
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  let reset = false;
  socket.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'ECONNRESET') reset = true;
  });
  const closed = new Promise<'reset' | 'closed'>((resolve) =>
    socket.on('close', () => resolve(reset ? 'reset' : 'closed')),
  );
  return { socket, received: () => Buffer.concat(chunks), closed };
}

describe('FaultProxy', () => {
  let server: net.Server;
  let accepted: Peer[];
  let proxy: FaultProxy;

  beforeEach(async () => {
    accepted = [];
    server = net.createServer((socket) => accepted.push(peer(socket)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    proxy = new FaultProxy({ host: '127.0.0.1', port: (server.address() as net.AddressInfo).port });
    await proxy.start();
  });

  afterEach(async () => {
    await proxy.stop();
    for (const p of accepted) p.socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  async function connect(): Promise<{ client: Peer; upstream: Peer }> {
    const socket = net.connect(proxy.port, '127.0.0.1');
    const client = peer(socket);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    const before = accepted.length;
    socket.write('hello');
    const upstream = await eventually(() => accepted[before], 'the server to accept');
    await eventually(() => upstream.received().toString() === 'hello', 'the first bytes');
    return { client, upstream };
  }

  it('passes bytes both ways and a close through', async () => {
    const { client, upstream } = await connect();
    upstream.socket.write('world');
    await eventually(() => client.received().toString() === 'world', 'bytes back');
    client.socket.end();
    await expect(upstream.closed).resolves.toBe('closed');
  });

  it('cut: resets open connections and refuses new ones; heals on pass', async () => {
    const { client, upstream } = await connect();
    await proxy.setMode({ kind: 'cut' });
    await expect(client.closed).resolves.toBe('reset');
    await expect(upstream.closed).resolves.toBe('reset');
    const refused = await new Promise<string>((resolve) => {
      const s = net.connect(proxy.port, '127.0.0.1');
      s.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      s.on('connect', () => resolve('connected'));
    });
    expect(refused).toBe('ECONNREFUSED');
    await proxy.setMode({ kind: 'pass' });
    const again = await connect();
    again.client.socket.destroy();
  });

  it('blackhole: keeps connections open, drops bytes both ways and closes, accepts new ones', async () => {
    const { client, upstream } = await connect();
    await proxy.setMode({ kind: 'blackhole' });
    client.socket.write('lost up');
    upstream.socket.write('lost down');
    // A connection made during the blackhole is accepted and never reaches the server.
    const late = peer(net.connect(proxy.port, '127.0.0.1'));
    await new Promise<void>((resolve) => late.socket.once('connect', resolve));
    late.socket.write('nobody');
    const bytes = 'lost up'.length + 'lost down'.length + 'nobody'.length;
    await eventually(() => proxy.counts.droppedBytes === bytes, 'the proxy to swallow the bytes');
    client.socket.end();
    await eventually(() => proxy.counts.droppedCloses === 1, 'the proxy to swallow the close');
    expect(upstream.received().toString()).toBe('hello');
    expect(client.received().toString()).toBe('');
    expect(upstream.socket.destroyed).toBe(false);
    expect(accepted.length).toBe(1);
    // Healed: the end that closed meanwhile is passed on as a reset; the silent connection stays silent.
    await proxy.setMode({ kind: 'pass' });
    await expect(upstream.closed).resolves.toBe('reset');
    late.socket.destroy();
    const fresh = await connect();
    fresh.upstream.socket.write('back');
    await eventually(() => fresh.client.received().toString() === 'back', 'bytes after the heal');
    fresh.client.socket.destroy();
  });

  it('slow: delays by the latency and throttles to the bandwidth', async () => {
    const { client, upstream } = await connect();
    await proxy.setMode({ kind: 'slow', latencyMs: 300, bytesPerSecond: 20_000 });
    const started = performance.now();
    upstream.socket.write('x');
    await eventually(() => client.received().length === 1, 'the delayed byte');
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    const big = Buffer.alloc(20_000, 7);
    const bulk = performance.now();
    upstream.socket.write(big);
    await eventually(() => client.received().length === 1 + big.length, 'the throttled bytes', 20_000);
    // 20 KB at 20 KB/s: about a second, plus the latency.
    expect(performance.now() - bulk).toBeGreaterThanOrEqual(1200);
    client.socket.destroy();
  });
});
