import net from 'node:net';
import { isoMicros, readingMicros } from './load.ts';
import { readingKey, type SentReading } from './types.ts';

/**
 * A cheap HTTP ingest load generator for the `overload` scenario: raw TCP connections with
 * keep-alive and pipelining, requests serialized by string concatenation (one reading of one device
 * each, `POST /v1/ingest`), written in one `write` per connection and tick, and the answers parsed
 * just enough to know each one's status (HTTP/1.1 answers come back in the order of the requests on
 * a connection, so the n-th answer is the n-th request's). Several times cheaper per request than
 * `http.request` or `fetch`, so that one process on the same machine can offer ten times what the
 * cloud sustains.
 *
 * Every reading's status is kept (0: not answered), so that the checker knows which readings were
 * acknowledged.
 */
export interface PipelinedTarget {
  port: number;
  devices: { localId: string; token: string }[];
  /** The sender index of device d in `readingMicros`, so keys never meet another scenario's. */
  senderBase?: number;
}

interface Conn {
  socket: net.Socket;
  /** The readings sent on this connection and not answered yet, oldest first, as device * 2^32 + n. */
  waiting: number[];
  head: number;
  buffer: Buffer;
  /** Requests made this tick, written together. */
  out: string[];
  closed: boolean;
}

const SHIFT = 2 ** 32;
/** Connections `open` establishes at once. */
const CONNECT_BATCH = 128;

export class PipelinedSender {
  private readonly conns: Conn[] = [];
  private readonly heads: string[];
  /** Per device, the status of each reading sent, by its index. */
  private readonly statuses: number[][];
  private turn = 0;
  private drainWaiters: (() => void)[] = [];
  /** Called after each answer (closed-loop senders send their next request from here). */
  private onAnswer: ((conn: Conn, status: number) => void) | null = null;
  /** Requests sent and not answered. */
  open = 0;
  /** Connections that ended (closed by the server, or failed), when (`performance.now()`) and with how many unanswered. */
  readonly losses: { at: number; unanswered: number }[] = [];
  readonly answers: Record<string, number> = {};
  /** Answers other than 200, 429 and 503-with-Retry-After, the first few whole. */
  readonly unexpected: string[] = [];
  unexpectedCount = 0;

  private constructor(private readonly target: PipelinedTarget) {
    this.heads = target.devices.map(
      (d) =>
        `POST /v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${d.token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: `,
    );
    this.statuses = target.devices.map(() => []);
  }

  /**
   * A sender whose connections are all established: opened a batch at a time, each batch once the
   * last is connected, as a fleet's connections arrive over time. Thousands opened at once overflow
   * the server's listen queue, and the kernel then resets some of them (SYN cookies that fail) at
   * their first request: losses of the generator's making, not the server's.
   */
  static async open(target: PipelinedTarget, connections: number): Promise<PipelinedSender> {
    const sender = new PipelinedSender(target);
    while (sender.conns.length < connections) {
      const batch = Array.from({ length: Math.min(CONNECT_BATCH, connections - sender.conns.length) }, () =>
        sender.connect(),
      );
      sender.conns.push(...batch);
      await Promise.all(
        batch.map(
          (c) =>
            new Promise<void>((resolve, reject) => {
              c.socket.once('connect', resolve);
              c.socket.once('error', reject);
            }),
        ),
      );
    }
    return sender;
  }

  get sent(): number {
    return this.statuses.reduce((n, s) => n + s.length, 0);
  }

  /** Every reading sent, acknowledged when it was answered 200. */
  *readings(): Generator<SentReading> {
    for (const [d, list] of this.statuses.entries()) {
      const localId = this.target.devices[d]!.localId;
      for (let n = 0; n < list.length; n++)
        yield { key: readingKey(localId, 'temperature', this.micros(d, n)), acknowledged: list[n] === 200 };
    }
  }

  private micros(d: number, n: number): number {
    return readingMicros((this.target.senderBase ?? 0) + d, n);
  }

  private connect(): Conn {
    const socket = net.connect({ host: '127.0.0.1', port: this.target.port, noDelay: true });
    const conn: Conn = { socket, waiting: [], head: 0, buffer: Buffer.alloc(0), out: [], closed: false };
    socket.on('data', (chunk: Buffer) => this.read(conn, chunk));
    socket.on('error', () => undefined); // 'close' follows
    socket.on('close', () => this.lost(conn));
    return conn;
  }

  /** The connection ended: what it had not answered never will be; the next requests go on a new one. */
  private lost(conn: Conn): void {
    if (conn.closed) return;
    conn.closed = true;
    if (!this.closing)
      this.losses.push({ at: performance.now(), unanswered: conn.waiting.length - conn.head });
    const i = this.conns.indexOf(conn);
    if (i >= 0 && !this.closing) this.conns[i] = this.connect();
    for (let k = conn.head; k < conn.waiting.length; k++) this.settle(conn, conn.waiting[k]!, 0, 'no answer');
    conn.waiting = [];
    conn.head = 0;
  }

  private closing = false;

  close(): void {
    this.closing = true;
    for (const c of this.conns) c.socket.destroy();
  }

  /** Queues one new reading of the next device on `conn` (written by `flush`). */
  private request(conn: Conn): void {
    const d = this.turn++ % this.heads.length;
    const list = this.statuses[d]!;
    const n = list.length;
    list.push(0);
    const device = this.target.devices[d]!;
    const body = `{"device":"${device.localId}","ts":"${isoMicros(this.micros(d, n))}","measurements":[{"type":"temperature","value":4}]}`;
    conn.out.push(`${this.heads[d]}${body.length}\r\n\r\n${body}`);
    conn.waiting.push(d * SHIFT + n);
    this.open++;
  }

  private flush(conn: Conn): void {
    if (conn.out.length === 0) return;
    conn.socket.write(conn.out.length === 1 ? conn.out[0]! : conn.out.join(''));
    conn.out = [];
  }

  private read(conn: Conn, chunk: Buffer): void {
    let buf = conn.buffer.length === 0 ? chunk : Buffer.concat([conn.buffer, chunk]);
    for (;;) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) break;
      const head = buf.toString('latin1', 0, end);
      const length = /\r\ncontent-length: *(\d+)/i.exec(head);
      const bodyLength = length ? Number(length[1]) : 0;
      if (buf.length < end + 4 + bodyLength) break;
      const status = Number(head.slice(9, 12));
      let what = String(status);
      if (status === 503 && !/\r\nretry-after: *\d+/i.test(head)) what = '503 without Retry-After';
      if (what !== '200' && what !== '429' && what !== '503') {
        this.unexpectedCount++;
        if (this.unexpected.length < 5)
          this.unexpected.push(
            `HTTP ${what}: ${buf.toString('utf8', end + 4, end + 4 + bodyLength).slice(0, 300)}`,
          );
      }
      const reading = conn.waiting[conn.head++];
      if (reading !== undefined) this.settle(conn, reading, status, what);
      buf = buf.subarray(end + 4 + bodyLength);
      if (/\r\nconnection: *close/i.test(head)) {
        conn.socket.destroy();
        break;
      }
    }
    if (conn.head > 4096 && conn.head * 2 > conn.waiting.length) {
      conn.waiting = conn.waiting.slice(conn.head);
      conn.head = 0;
    }
    conn.buffer = buf.length === 0 ? Buffer.alloc(0) : Buffer.from(buf);
    this.flush(conn); // the closed loop's next requests
  }

  private settle(conn: Conn, reading: number, status: number, what: string): void {
    const d = Math.floor(reading / SHIFT);
    this.statuses[d]![reading - d * SHIFT] = status;
    this.answers[what] = (this.answers[what] ?? 0) + 1;
    this.open--;
    this.onAnswer?.(conn, status);
    if (this.open === 0) for (const w of this.drainWaiters.splice(0)) w();
  }

  private flushAll(): void {
    for (const c of this.conns) this.flush(c);
  }

  /** Resolves once every request sent has been answered or its connection lost; false after `timeoutMs`. */
  drained(timeoutMs: number): Promise<boolean> {
    if (this.open === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.drainWaiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  /**
   * Each of `connections` (at most the sender's) keeps one request open, sending the next as soon as
   * its answer comes, for `ms`: readings acknowledged (200) per second.
   */
  async closedLoop(connections: number, ms: number): Promise<number> {
    const started = performance.now();
    const end = started + ms;
    let acked = 0;
    const used = new Set(this.conns.slice(0, connections));
    this.onAnswer = (conn, status) => {
      if (status === 200 && performance.now() <= end) acked++;
      if (performance.now() < end && used.has(conn) && !conn.closed) this.request(conn);
    };
    for (const c of used) this.request(c);
    this.flushAll();
    // Connections replaced after a loss join in their predecessor's place.
    const poll = setInterval(() => {
      for (const [i, c] of this.conns.entries())
        if (i < connections && !used.has(c)) {
          used.add(c);
          this.request(c);
          this.flush(c);
        }
    }, 100);
    await new Promise((resolve) => setTimeout(resolve, ms));
    clearInterval(poll);
    this.onAnswer = null;
    await this.drained(60_000);
    return acked / ((performance.now() - started) / 1000);
  }

  /**
   * Open loop: readings due at `rate` per second for `ms`, sent whatever the answers, spread over the
   * connections in ticks of about 2 ms, up to `maxOpen` unanswered at once (a reading due beyond that
   * is not sent, and counted). Answers the rate offered and the rate answered while it ran.
   */
  async openLoop(
    rate: number,
    ms: number,
    maxOpen: number,
    alive: () => boolean,
  ): Promise<{ offered: number; answered: number; notSent: number; seconds: number }> {
    const started = performance.now();
    const answeredBefore = Object.values(this.answers).reduce((a, b) => a + b, 0);
    let due = 0;
    let notSent = 0;
    let c = 0;
    for (;;) {
      if (!alive()) break;
      // A late tick (a loaded machine) sends everything due meanwhile; the last one, all due by the end.
      const elapsed = Math.min(performance.now() - started, ms);
      const now = Math.floor((elapsed / 1000) * rate);
      for (; due < now; due++) {
        if (this.open >= maxOpen) {
          notSent++;
          continue;
        }
        this.request(this.conns[c++ % this.conns.length]!);
      }
      this.flushAll();
      if (elapsed >= ms) break;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    const seconds = Math.max(ms, performance.now() - started) / 1000;
    const answered = Object.values(this.answers).reduce((a, b) => a + b, 0) - answeredBefore;
    return { offered: (due - notSent) / seconds, answered: answered / seconds, notSent, seconds };
  }
}
