import type http from 'node:http';
import type { Socket } from 'node:net';
import { ApiError, OVERLOADED_RETRY_SECONDS } from '../errors.ts';
import { newId } from '../../../shared/ids.ts';
import { errorBody } from './error-handler.ts';

/**
 * Unanswered requests a connection may have before the server stops reading from it. Devices send
 * one request at a time; only a pipelining client goes past this. HTTP/1.1 answers a connection's
 * requests in order, so every request read behind one still waiting for its ingest group is held in
 * memory, answered or not, until the answers ahead of it are written: without a bound, one pipelining
 * client holds as many requests as it sends. Node stops reading by itself only once 16 KiB of
 * answers wait to be written, which requests accepted and waiting for their group never produce.
 */
export const PIPELINE_DEPTH = 64;

export interface ConnectionLimits {
  /** Unanswered requests one connection may have before it is no longer read (PIPELINE_DEPTH). */
  depth?: number;
  /**
   * Requests read behind their connection's first unanswered one, on all connections together
   * (HTTP_MAX_PIPELINED): past it, a connection that pipelines is no longer read, and a paused one
   * is read again only as room under it allows.
   */
  maxPipelined?: number;
  /**
   * Pipelined requests on all connections past which a connection whose read brings one more is
   * closed (twice `maxPipelined` unless given).
   */
  cutPipelined?: number;
  /** How long a paused connection may wait for room before it is read all the same (READY_MAX_WAIT_MS). */
  readyMaxWaitMs?: number;
  /** Open connections (HTTP_MAX_CONNECTIONS): past it, a new one is answered 503 and closed. */
  maxConnections?: number;
}

/**
 * How long a connection may go unread for room under `maxPipelined`, counted from when it stopped
 * being read (paused for its own depth or for the bound), before it is read all the same. Node closes
 * a connection that sits in the middle of a request for `headersTimeout` (60 s), and one with nothing
 * unanswered for `keepAliveTimeout` (65 s, counted from its last answer, however long before the
 * pause that was): a connection must be read well within both, so one with nothing unanswered is
 * also read all the same once it has been idle for all but KEEP_ALIVE_MARGIN_MS of
 * `keepAliveTimeout`. Room is short for longer only when the pipelined requests cannot be answered
 * (held behind event streams, which are never answered) or when the clients have more queued than
 * the process answers in that time; the read it then brings is bounded by `cutPipelined`.
 */
export const READY_MAX_WAIT_MS = 30_000;
/**
 * The most one read of a connection brings, in bytes: Node reads a socket 64 KiB at a time. In
 * requests, a connection's own average request size tells how many that is.
 */
const READ_BYTES = 65_536;
/** How often connections waiting for room are looked at while no answer comes. */
const WAKE_MS = 100;
/** How long before Node's keep-alive timeout an idle connection waiting for room is read (at most half the timeout). */
const KEEP_ALIVE_MARGIN_MS = 5000;

/**
 * How long a connection refused for HTTP_MAX_CONNECTIONS may take to read its 503 and close, whatever
 * it sends meanwhile.
 */
export const REFUSED_LINGER_MS = 5000;
/**
 * How long a keep-alive connection must have been idle, after at least one answered request, before
 * it is closed to make room at HTTP_MAX_CONNECTIONS: a connection just accepted, or one whose client
 * is about to reuse it, is not taken.
 */
export const RECLAIM_IDLE_MS = 1000;
const REFUSED_REQUESTS = Symbol('refused requests');
/** The answer to a connection past HTTP_MAX_CONNECTIONS. */
const TOO_MANY_CONNECTIONS = new ApiError(
  503,
  'overloaded',
  'the server has too many connections open; retry after Retry-After seconds',
  undefined,
  { 'Retry-After': String(OVERLOADED_RETRY_SECONDS) },
);

const READING = 0;
/** Not read: over its own depth, waiting for its own answers. */
const PAUSED = 1;
/** Not read: waiting for room under `maxPipelined` (in `ready`, in the order it began to wait). */
const READY = 2;

/** One open connection. */
interface Conn {
  state: typeof READING | typeof PAUSED | typeof READY;
  /** Its requests read and not yet answered. */
  unanswered: number;
  /** Whether it has ever had a request read behind an unanswered one. */
  pipeliner: boolean;
  /** Requests read since it opened (with the bytes it sent, its average request's size). */
  read: number;
  /** Room set aside for the read it was read again for, until that read comes (0: none). */
  reserved: number;
  /** Which setting-aside `reserved` is, so that an older one's expiry leaves a newer one alone. */
  reservedSeq: number;
  /** Read again for one read: paused again as that read's first request comes. */
  oneRead: boolean;
  /** When it last stopped being read (`performance.now()`): its wait for room counts from then. */
  stoppedAt: number;
  /** When its last unanswered request was answered (`performance.now()`): Node's keep-alive clock. */
  idleAt: number;
}

/**
 * The server's connections and the requests each has unanswered. Four bounds keep what a process
 * holds for its HTTP clients finite, whatever they send:
 *
 * - a connection with more than `depth` unanswered requests is paused (its further requests wait in
 *   the operating system's buffers and the client's) until half of them are answered;
 * - once the requests pipelined on all connections (read behind their connection's first unanswered
 *   one) number more than `maxPipelined`, every connection that has ever pipelined is paused; a
 *   client sending one request at a time (a device, a browser, an event stream) is never paused by
 *   it. Paused connections are read again one at a time, in the order they began to wait, each
 *   once there is room under `maxPipelined` for as many of its requests as one read can bring (64
 *   KiB of them, by its average request's size), or once it has gone unread for `readyMaxWaitMs` (an
 *   idle one also before Node's keep-alive timeout would close it); while more than half the bound is
 *   pipelined, such a connection gets that one read and waits again;
 * - Node parses a whole read (up to 64 KiB, some 1,400 minimal requests) before it can stop, so what
 *   one read brings is the client's to choose: a connection whose read brings a pipelined request
 *   while `cutPipelined` are pipelined is closed at once (its unanswered requests were never
 *   acknowledged), and the rest of that read is dropped. What the process holds is thereby at most
 *   one request per connection plus `cutPipelined`;
 * - a connection beyond `maxConnections` is first made room for by closing the keep-alive connection
 *   idle longest (for RECLAIM_IDLE_MS at least), and where there is none it is answered 503
 *   `overloaded` with Retry-After before its request is handled, and closed.
 *
 * While stopping, connections with nothing unanswered are closed at once.
 */
export class Connections {
  /** Every open connection, oldest first. */
  private readonly open = new Map<Socket, Conn>();
  /** Connections read now that have pipelined: those paused, all together, past `maxPipelined`. */
  private readonly readingPipeliners = new Set<Socket>();
  /**
   * Connections waiting for room under `maxPipelined`, in the order they began to, and when each is
   * read all the same (`performance.now()`).
   */
  private readonly ready = new Map<Socket, number>();
  /** How long Node keeps a connection with nothing unanswered open (`server.keepAliveTimeout`; 0: forever). */
  private keepAlive = (): number => 0;
  /** Connections with nothing unanswered after at least one answer, longest idle first, and since when. */
  private readonly idle = new Map<Socket, number>();
  /** Connections refused for `maxConnections` and not yet closed. */
  private readonly refusing = new Set<Socket>();
  private readonly depth: number;
  private readonly maxPipelined: number;
  private readonly cutPipelined: number;
  private readonly readyMaxWaitMs: number;
  private readonly maxConnections: number;
  /** Requests read behind their connection's first unanswered one, on every connection. */
  private pipelinedNow = 0;
  /** Room set aside for the reads of connections read again. */
  private reservedNow = 0;
  private reservedSeq = 0;
  private heldNow = 0;
  /** Runs `pump` again while connections wait for room and no answer comes (waits run out). */
  private timer: NodeJS.Timeout | null = null;
  /** Connections paused for pipelining (their own depth or the process-wide bound), since the start. */
  pauses = 0;
  /** Connections closed for a read past `cutPipelined`, since the start. */
  cuts = 0;
  /** Connections refused with 503 for `maxConnections`, since the start. */
  refused = 0;
  /** Idle keep-alive connections closed to make room for a new one, since the start. */
  reclaimed = 0;

  constructor(limits: ConnectionLimits = {}) {
    this.depth = limits.depth ?? PIPELINE_DEPTH;
    this.maxPipelined = limits.maxPipelined ?? Infinity;
    this.cutPipelined = limits.cutPipelined ?? 2 * this.maxPipelined;
    this.readyMaxWaitMs = limits.readyMaxWaitMs ?? READY_MAX_WAIT_MS;
    this.maxConnections = limits.maxConnections ?? Infinity;
  }

  /**
   * Tracks `server`'s connections and hands `handle` every request read on a connection it admitted
   * (never one on a connection refused for `maxConnections`: that one has its answer already, nor
   * one on a connection closed for `cutPipelined`).
   */
  track(server: http.Server, handle: (req: http.IncomingMessage, res: http.ServerResponse) => void): void {
    this.keepAlive = () => server.keepAliveTimeout;
    server.on('connection', (socket: Socket) => {
      if (this.open.size >= this.maxConnections && !this.reclaimIdle()) {
        this.refuse(socket);
        return;
      }
      const conn: Conn = {
        state: READING,
        pipeliner: false,
        unanswered: 0,
        read: 0,
        reserved: 0,
        reservedSeq: 0,
        oneRead: false,
        stoppedAt: 0,
        idleAt: performance.now(),
      };
      this.open.set(socket, conn);
      socket.once('close', () => this.closed(socket));
      // Node resumes a connection by itself whenever its queued answers fall under 16 KiB (an answer
      // written behind one still waiting does that): a connection paused here is paused again.
      // This listener runs after Node's own, which has just restarted reading.
      socket.on('resume', () => {
        if (conn.state !== READING && !socket.destroyed) pause(socket);
      });
    });
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      const socket = req.socket;
      const conn = this.open.get(socket);
      if (conn === undefined) {
        if (!socket.destroyed) this.refusedRequest(socket);
        return;
      }
      if (conn.reserved > 0) this.release(conn);
      const count = conn.unanswered + 1;
      if (count > 1 && this.pipelinedNow >= this.cutPipelined) {
        this.cut(socket);
        return;
      }
      this.idle.delete(socket);
      conn.unanswered = count;
      conn.read++;
      this.heldNow++;
      if (count > 1) this.pipelinedNow++;
      if (count > 1 && !conn.pipeliner) {
        conn.pipeliner = true;
        if (conn.state === READING) this.readingPipeliners.add(socket);
      }
      // A connection read again for room gets one read (the one now being parsed) while more than
      // half the bound is pipelined, and reads on freely otherwise. Past the bound every pipelining
      // connection still read is paused, not only this one: the reads the event loop has ready for
      // them in this same turn are then never made (libuv drops the events of a socket that stopped
      // reading), where each would bring up to 64 KiB.
      const oneRead = conn.oneRead;
      conn.oneRead = false;
      if (
        conn.state === READING &&
        (count > this.depth || (oneRead && this.pipelinedNow > this.maxPipelined / 2))
      )
        this.pauseConn(socket, conn);
      else if (conn.state === READY && count > this.depth / 2) {
        // Paused for room in the middle of a read whose rest took it past half its depth: it waits
        // for its own answers before it waits for room again, as if paused for its depth.
        this.ready.delete(socket);
        conn.state = PAUSED;
      }
      if (count > 1 && this.pipelinedNow > this.maxPipelined)
        for (const s of this.readingPipeliners) this.pauseConn(s, this.open.get(s)!);
      // 'close' follows the answer's end, or the connection's loss before it.
      res.once('close', () => this.answered(socket));
      handle(req, res);
    });
  }

  private answered(socket: Socket): void {
    const conn = this.open.get(socket);
    if (conn === undefined || conn.unanswered === 0) return;
    const count = conn.unanswered--;
    this.heldNow--;
    if (count > 1) this.pipelinedNow--;
    if (conn.unanswered === 0) {
      conn.idleAt = performance.now();
      if (conn.state === READING) this.idle.set(socket, Date.now());
    }
    if (conn.state === PAUSED && conn.unanswered <= this.depth / 2) this.waitForRoom(socket, conn);
    this.pump();
  }

  /** A connection that closed with its requests unanswered (their answers never come). */
  private closed(socket: Socket): void {
    const conn = this.open.get(socket);
    if (conn === undefined) return;
    this.open.delete(socket);
    this.ready.delete(socket);
    this.readingPipeliners.delete(socket);
    this.idle.delete(socket);
    if (conn.reserved > 0) this.release(conn);
    this.heldNow -= conn.unanswered;
    this.pipelinedNow -= Math.max(conn.unanswered - 1, 0);
    conn.unanswered = 0;
    this.pump();
  }

  /** A connection whose read brought a request past `cutPipelined`: closed before it is handled. */
  private cut(socket: Socket): void {
    this.cuts++;
    this.closed(socket);
    socket.destroy();
  }

  /** Stops reading a connection: until its own answers are down to half its depth, then until room. */
  private pauseConn(socket: Socket, conn: Conn): void {
    this.pauses++;
    // Paused before the read it was read again for came: that read is not coming now.
    if (conn.reserved > 0) this.release(conn);
    conn.oneRead = false;
    conn.stoppedAt = performance.now();
    this.readingPipeliners.delete(socket);
    if (conn.unanswered > this.depth / 2) conn.state = PAUSED;
    else this.waitForRoom(socket, conn);
    pause(socket);
  }

  private waitForRoom(socket: Socket, conn: Conn): void {
    conn.state = READY;
    this.ready.set(socket, this.readAnywayAt(conn));
    this.wake();
  }

  /**
   * When a connection waiting for room is read all the same: `readyMaxWaitMs` after it stopped being
   * read, and, with nothing unanswered, before Node's keep-alive timeout closes it (a request its
   * client sent meanwhile would be lost with it).
   */
  private readAnywayAt(conn: Conn): number {
    const waited = conn.stoppedAt + this.readyMaxWaitMs;
    const keepAlive = this.keepAlive();
    if (conn.unanswered > 0 || keepAlive <= 0) return waited;
    return Math.min(waited, conn.idleAt + keepAlive - Math.min(KEEP_ALIVE_MARGIN_MS, keepAlive / 2));
  }

  /**
   * Reads connections waiting for room again, in the order they began to wait: each once the room
   * under `maxPipelined` (less what is set aside for the reads of those read again just before) holds
   * as many of its requests as one read can bring, and none before it is still waiting; or once its
   * time to be read all the same has come (`readAnywayAt`; looked for past the first that does not
   * fit only when `overdueToo`, from the timer, since those times are not in the queue's order).
   * Room for its read is set aside until the read comes, or until the event loop has been round
   * twice (a socket read again is read in the next turn's poll at the latest; a client with nothing
   * more to send brings nothing, and its room must not stay taken).
   */
  private pump(overdueToo = false): void {
    if (this.ready.size === 0) return;
    const now = performance.now();
    let resumed: [Conn, number][] | null = null;
    let blocked = false;
    for (const [socket, readAnywayAt] of this.ready) {
      const conn = this.open.get(socket)!;
      const need = this.readSize(socket, conn);
      if (!blocked && need > this.maxPipelined - this.pipelinedNow - this.reservedNow) blocked = true;
      if (blocked && now < readAnywayAt) {
        if (overdueToo) continue;
        break;
      }
      this.ready.delete(socket);
      conn.state = READING;
      conn.oneRead = true;
      if (conn.pipeliner) this.readingPipeliners.add(socket);
      conn.reserved = need;
      conn.reservedSeq = ++this.reservedSeq;
      this.reservedNow += need;
      (resumed ??= []).push([conn, conn.reservedSeq]);
      if (conn.unanswered === 0) {
        // To the back of the idle order: it is read again now, not idle longest.
        this.idle.delete(socket);
        this.idle.set(socket, Date.now());
      }
      if (!socket.destroyed) resume(socket);
    }
    if (resumed !== null) {
      const expiring = resumed;
      setImmediate(() =>
        setImmediate(() => {
          for (const [conn, seq] of expiring)
            if (conn.reservedSeq === seq && conn.reserved > 0) this.release(conn);
          this.pump();
        }),
      );
    }
    if (this.ready.size > 0) this.wake();
  }

  /**
   * The most requests one read of a connection can bring, going by its requests so far, and one more
   * for the request a read begins in the middle of; at most half the bound, so that a connection
   * fits once the pipelined requests are down to half, its own among them.
   */
  private readSize(socket: Socket, conn: Conn): number {
    const average = conn.read === 0 ? 1 : Math.max(socket.bytesRead / conn.read, 1);
    return Math.min(Math.ceil(READ_BYTES / average) + 1, Math.max(Math.floor(this.maxPipelined / 2), 1));
  }

  private release(conn: Conn): void {
    this.reservedNow -= conn.reserved;
    conn.reserved = 0;
  }

  /** Runs `pump` again in WAKE_MS, for connections that wait while no answer comes. */
  private wake(): void {
    if (this.timer !== null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.pump(true);
    }, WAKE_MS);
    this.timer.unref();
  }

  /**
   * Closes the connection idle longest, if it has been idle RECLAIM_IDLE_MS; false when none has. Its
   * client sees the connection close, as at the keep-alive timeout.
   */
  private reclaimIdle(): boolean {
    const first = this.idle.entries().next();
    if (first.done || Date.now() - first.value[1] < RECLAIM_IDLE_MS) return false;
    const socket = first.value[0];
    this.closed(socket);
    socket.destroy();
    this.reclaimed++;
    return true;
  }

  /**
   * Answers a connection over the limit before its request is handled: 503 `overloaded` in the API's
   * error envelope, then the end of the connection. Node's parser, attached before this listener,
   * still reads what the client sends: the first request (sent before the client read the answer)
   * is left alone, so that closing does not reset the connection before the client has read the
   * answer; a second one closes it at once, and so does REFUSED_LINGER_MS whatever it sends.
   */
  private refuse(socket: Socket): void {
    this.refused++;
    this.refusing.add(socket);
    socket.once('close', () => this.refusing.delete(socket));
    const requestId = newId('req');
    const body = JSON.stringify(errorBody(TOO_MANY_CONNECTIONS, requestId));
    const headers = {
      Connection: 'close',
      'Content-Type': 'application/json; charset=utf-8',
      Date: new Date().toUTCString(),
      'Cache-Control': 'no-store',
      ...TOO_MANY_CONNECTIONS.headers,
      'X-Request-Id': requestId,
      'Content-Length': String(Buffer.byteLength(body)),
    };
    socket.on('error', () => undefined);
    setTimeout(() => socket.destroy(), REFUSED_LINGER_MS).unref();
    socket.end(
      `HTTP/1.1 503 Service Unavailable\r\n${Object.entries(headers)
        .map(([name, value]) => `${name}: ${value}\r\n`)
        .join('')}\r\n${body}`,
    );
  }

  /** A request read on a refused connection: never handed on; the second closes it. */
  private refusedRequest(socket: Socket & { [REFUSED_REQUESTS]?: number }): void {
    socket[REFUSED_REQUESTS] = (socket[REFUSED_REQUESTS] ?? 0) + 1;
    if (socket[REFUSED_REQUESTS] > 1) socket.destroy();
  }

  /** Requests read and not yet answered, on every connection. */
  get held(): number {
    return this.heldNow;
  }

  /** Requests read behind their connection's first unanswered one, on every connection. */
  get pipelined(): number {
    return this.pipelinedNow;
  }

  /** Connections refused for the limit and not yet closed. */
  get refusedOpen(): number {
    return this.refusing.size;
  }

  /** Open connections (those refused for the limit are not counted). */
  get count(): number {
    return this.open.size;
  }

  /** Closes every connection with no request waiting for its answer, and every refused one. */
  closeUnbusy(): void {
    for (const [socket, conn] of this.open) if (conn.unanswered === 0) socket.destroy();
    for (const socket of this.refusing) socket.destroy();
  }
}

/**
 * Node's HTTP server's own way to stop reading a connection (what it does when 16 KiB of answers
 * wait): the `_paused` flag keeps a request's body read from resuming the socket, and Node pauses
 * the connection's parser after the read it is in. A plain `socket.pause()` is undone by the next
 * body read; Node's own resume is undone by the 'resume' listener of `track`.
 */
interface ServerSocket extends Socket {
  _paused?: boolean;
  parser?: { resume(): void } | null;
}

function pause(socket: ServerSocket): void {
  socket._paused = true;
  socket.pause();
}

/** As Node resumes a connection once its answers have drained. */
function resume(socket: ServerSocket): void {
  socket._paused = false;
  socket.parser?.resume();
  socket.resume();
}
