import net from 'node:net';

/**
 * What the proxy does to the traffic between its two sides:
 * - `pass`: forwards every byte as it comes;
 * - `cut`: resets every connection (RST) and stops listening, so new connections are refused;
 * - `blackhole`: keeps every connection open and accepts new ones, but drops every byte in both
 *   directions and forwards no close: only the endpoints' own keepalives and timeouts can notice;
 * - `slow`: delays every byte by `latencyMs` and lets at most `bytesPerSecond` through in each
 *   direction.
 */
export type ProxyMode =
  | { kind: 'pass' }
  | { kind: 'cut' }
  | { kind: 'blackhole' }
  | { kind: 'slow'; latencyMs: number; bytesPerSecond: number };

/** Bytes queued in one direction before the sending side is paused (backpressure). */
const HIGH_WATER = 64 * 1024;
/** Slow mode hands data on in pieces of at most this size, so that throttling is smooth. */
const PIECE = 1024;

/** One direction of one connection: bytes are released in order, each at its own time. */
class Lane {
  private readonly queue: { data: Buffer; at: number }[] = [];
  private queued = 0;
  private lastRelease = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly from: net.Socket,
    private readonly to: net.Socket,
    private readonly mode: () => ProxyMode,
  ) {}

  push(data: Buffer): void {
    const mode = this.mode();
    const now = performance.now();
    if (mode.kind !== 'slow') {
      this.queue.push({ data, at: Math.max(now, this.lastRelease) });
    } else {
      for (let i = 0; i < data.length; i += PIECE) {
        const piece = data.subarray(i, i + PIECE);
        // Latency from arrival; the bandwidth limit spaces pieces by their size.
        const at =
          Math.max(now + mode.latencyMs, this.lastRelease) + (piece.length / mode.bytesPerSecond) * 1000;
        this.lastRelease = at;
        this.queue.push({ data: piece, at });
      }
    }
    this.queued += data.length;
    if (this.queued > HIGH_WATER) this.from.pause();
    this.release();
  }

  private release(): void {
    if (this.timer) return;
    const now = performance.now();
    while (this.queue.length > 0 && this.queue[0]!.at <= now) {
      const { data } = this.queue.shift()!;
      this.queued -= data.length;
      if (!this.to.destroyed) this.to.write(data);
    }
    if (this.queued <= HIGH_WATER && this.from.isPaused()) this.from.resume();
    if (this.queue.length > 0) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.release();
      }, this.queue[0]!.at - now);
    }
  }

  /** Forgets what is queued (a blackhole or a reset swallows it). */
  drop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.queue.length = 0;
    this.queued = 0;
    if (this.from.isPaused()) this.from.resume();
  }
}

interface Pair {
  client: net.Socket;
  upstream: net.Socket | null;
  /** A connection that lost bytes to a blackhole stays silent for good (its stream has a hole). */
  black: boolean;
  lanes: Lane[];
}

/**
 * A fault-injecting TCP proxy for the chaos scenarios (docs/reliability.md, "Chaos"): it listens on
 * 127.0.0.1 and forwards each connection to `target` byte for byte, so TLS (the uplink's mutual TLS)
 * passes through untouched. `setMode` switches what it does to the traffic (`ProxyMode`).
 *
 * A connection that went through a blackhole never carries bytes again: what was dropped cannot be
 * replayed, as a TCP connection whose segments are lost for longer than its retransmissions is
 * dead. Its ends learn so from their keepalives; once the blackhole is over, an end that closes is
 * passed on as a reset to the other (as a retransmission that meets a closed port would be).
 */
export class FaultProxy {
  private server: net.Server | null = null;
  private readonly pairs = new Set<Pair>();
  private current: ProxyMode = { kind: 'pass' };
  private boundPort = 0;
  /** Connections accepted, reset, caught in a blackhole; bytes and closes a blackhole swallowed. */
  readonly counts = { connections: 0, resets: 0, blackholed: 0, droppedBytes: 0, droppedCloses: 0 };

  constructor(private readonly target: { host: string; port: number }) {}

  get port(): number {
    return this.boundPort;
  }

  get mode(): ProxyMode {
    return this.current;
  }

  async start(mode: ProxyMode = { kind: 'pass' }): Promise<void> {
    this.current = mode;
    if (mode.kind !== 'cut') await this.listen();
    else this.boundPort = await reservePort();
  }

  private async listen(): Promise<void> {
    const server = net.createServer((socket) => this.accept(socket));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.boundPort, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.boundPort = (server.address() as net.AddressInfo).port;
    this.server = server;
  }

  private accept(client: net.Socket): void {
    this.counts.connections++;
    const pair: Pair = { client, upstream: null, black: this.current.kind === 'blackhole', lanes: [] };
    this.pairs.add(pair);
    if (pair.black) this.counts.blackholed++;
    client.on('error', () => undefined);
    client.on('close', () => this.ended(pair, client));
    const mode = () => this.current;
    if (pair.black) {
      // Accepted, and nothing ever reaches the other side.
      client.on('data', (data: Buffer) => (this.counts.droppedBytes += data.length));
      return;
    }
    const upstream = net.connect(this.target.port, this.target.host);
    pair.upstream = upstream;
    upstream.on('error', () => undefined);
    upstream.on('close', () => this.ended(pair, upstream));
    const up = new Lane(client, upstream, mode);
    const down = new Lane(upstream, client, mode);
    pair.lanes = [up, down];
    client.on('data', (data: Buffer) =>
      pair.black ? (this.counts.droppedBytes += data.length) : up.push(data),
    );
    upstream.on('data', (data: Buffer) =>
      pair.black ? (this.counts.droppedBytes += data.length) : down.push(data),
    );
  }

  /** One end closed: the other is told, unless a blackhole swallows it. */
  private ended(pair: Pair, which: net.Socket): void {
    if (pair.black && this.current.kind === 'blackhole') {
      this.counts.droppedCloses++;
      return;
    }
    const other = which === pair.client ? pair.upstream : pair.client;
    this.pairs.delete(pair);
    for (const lane of pair.lanes) lane.drop();
    if (other && !other.destroyed) {
      if (pair.black) other.resetAndDestroy();
      else other.end();
    }
  }

  async setMode(mode: ProxyMode): Promise<void> {
    const was = this.current;
    this.current = mode;
    if (mode.kind === 'cut') {
      if (this.server) {
        const server = this.server;
        this.server = null;
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        for (const pair of this.pairs) this.reset(pair);
        await closed;
      } else {
        for (const pair of this.pairs) this.reset(pair);
      }
      return;
    }
    if (was.kind === 'cut') await this.listen();
    if (mode.kind === 'blackhole') {
      for (const pair of this.pairs) {
        if (!pair.black) this.counts.blackholed++;
        pair.black = true;
        for (const lane of pair.lanes) lane.drop();
      }
      return;
    }
    // Out of a blackhole: a connection one of whose ends closed meanwhile is reset at the other.
    for (const pair of [...this.pairs]) {
      if (!pair.black) continue;
      const closed = pair.client.destroyed || (pair.upstream?.destroyed ?? true);
      if (closed) this.reset(pair);
    }
  }

  private reset(pair: Pair): void {
    this.pairs.delete(pair);
    this.counts.resets++;
    for (const lane of pair.lanes) lane.drop();
    for (const socket of [pair.client, pair.upstream])
      if (socket && !socket.destroyed) socket.resetAndDestroy();
  }

  /** Resets every connection and stops listening. */
  async stop(): Promise<void> {
    await this.setMode({ kind: 'cut' });
  }
}

/** A port that is free now, for a proxy that starts cut and listens only once healed. */
async function reservePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
