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
   * (HTTP_MAX_PIPELINED): past it, a connection that pipelines is no longer read.
   */
  maxPipelined?: number;
  /** Open connections (HTTP_MAX_CONNECTIONS): past it, a new one is answered 503 and closed. */
  maxConnections?: number;
}

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

/**
 * The server's connections and the requests each has unanswered. Three bounds keep what a process
 * holds for its HTTP clients finite, whatever they send:
 *
 * - a connection with more than `depth` unanswered requests is paused (its further requests wait in
 *   the operating system's buffers and the client's) until half of them are answered;
 * - while the requests pipelined on all connections (read behind their connection's first unanswered
 *   one) number more than `maxPipelined`, every connection that pipelines is paused as its next
 *   request is read, until they are down to half; a client sending one request at a time (a device,
 *   a browser, an event stream) is never paused by it;
 * - a connection beyond `maxConnections` is first made room for by closing the keep-alive connection
 *   idle longest (for RECLAIM_IDLE_MS at least), and where there is none it is answered 503
 *   `overloaded` with Retry-After before its request is handled, and closed.
 *
 * Node parses a whole read (up to 64 KiB) at a time, so a paused connection holds at most its bound
 * plus one read's worth of requests. While stopping, connections with nothing unanswered are closed
 * at once.
 */
export class Connections {
  /** Every open connection, with the number of its requests not yet answered, oldest first. */
  private readonly open = new Map<Socket, number>();
  private readonly paused = new Set<Socket>();
  /** Connections with nothing unanswered after at least one answer, longest idle first, and since when. */
  private readonly idle = new Map<Socket, number>();
  /** Connections refused for `maxConnections` and not yet closed. */
  private readonly refusing = new Set<Socket>();
  private readonly depth: number;
  private readonly maxPipelined: number;
  private readonly maxConnections: number;
  /** Requests read behind their connection's first unanswered one, on every connection. */
  private pipelinedNow = 0;
  /** Set once `pipelinedNow` passes `maxPipelined`, cleared once it is down to half. */
  private full = false;
  private heldNow = 0;
  /** Connections paused for pipelining (their own depth or the process-wide bound), since the start. */
  pauses = 0;
  /** Connections refused with 503 for `maxConnections`, since the start. */
  refused = 0;
  /** Idle keep-alive connections closed to make room for a new one, since the start. */
  reclaimed = 0;

  constructor(limits: ConnectionLimits = {}) {
    this.depth = limits.depth ?? PIPELINE_DEPTH;
    this.maxPipelined = limits.maxPipelined ?? Infinity;
    this.maxConnections = limits.maxConnections ?? Infinity;
  }

  /**
   * Tracks `server`'s connections and hands `handle` every request read on a connection it admitted
   * (never one on a connection refused for `maxConnections`: that one has its answer already).
   */
  track(server: http.Server, handle: (req: http.IncomingMessage, res: http.ServerResponse) => void): void {
    server.on('connection', (socket: Socket) => {
      if (this.open.size >= this.maxConnections && !this.reclaimIdle()) {
        this.refuse(socket);
        return;
      }
      this.open.set(socket, 0);
      socket.once('close', () => this.closed(socket));
      // Node resumes a connection by itself whenever its queued answers fall under 16 KiB (an answer
      // written behind one still waiting does that): a connection paused here is paused again.
      // This listener runs after Node's own, which has just restarted reading.
      socket.on('resume', () => {
        if (this.paused.has(socket) && !socket.destroyed) pause(socket);
      });
    });
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      const socket = req.socket;
      const before = this.open.get(socket);
      if (before === undefined) {
        this.refusedRequest(socket);
        return;
      }
      this.idle.delete(socket);
      const count = before + 1;
      this.open.set(socket, count);
      this.heldNow++;
      if (count > 1 && ++this.pipelinedNow > this.maxPipelined) this.full = true;
      if ((count > this.depth || (this.full && count > 1)) && !this.paused.has(socket)) {
        this.paused.add(socket);
        this.pauses++;
        pause(socket);
      }
      // 'close' follows the answer's end, or the connection's loss before it.
      res.once('close', () => this.answered(socket));
      handle(req, res);
    });
  }

  private answered(socket: Socket): void {
    const count = this.open.get(socket);
    if (count === undefined || count === 0) return;
    this.open.set(socket, count - 1);
    if (count === 1) this.idle.set(socket, Date.now());
    this.forget(count);
    // A connection with nothing pipelined any more is read again even while the process-wide bound
    // is full: others (a request pipelined behind an event stream, say) may keep it full for long, and
    // this one adds at most one read.
    if (this.paused.has(socket) && (count - 1 <= 1 || (!this.full && count - 1 <= this.depth / 2)))
      this.resume(socket);
  }

  /** A connection that closed with `count` requests unanswered (their answers never come). */
  private closed(socket: Socket): void {
    const count = this.open.get(socket);
    if (count === undefined) return;
    this.open.delete(socket);
    this.paused.delete(socket);
    this.idle.delete(socket);
    for (let n = count; n > 0; n--) this.forget(n);
  }

  /**
   * One of a connection's `count` unanswered requests leaves the counts (answered, or its connection
   * closed). Once the pipelined requests are down to half the bound, every paused connection that is
   * not over its own depth is read again: one over half its depth too, so that no connection waits
   * for more than its own answers and one such turn (Node closes a connection that sits in the middle
   * of a request for `headersTimeout`, or idle for `keepAliveTimeout`).
   */
  private forget(count: number): void {
    this.heldNow--;
    if (count > 1) this.pipelinedNow--;
    if (this.full && this.pipelinedNow <= this.maxPipelined / 2) {
      this.full = false;
      for (const s of this.paused) if ((this.open.get(s) ?? 0) <= this.depth) this.resume(s);
    }
  }

  private resume(socket: Socket): void {
    this.paused.delete(socket);
    if (!socket.destroyed) resume(socket);
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
    for (const [socket, count] of this.open) if (count <= 0) socket.destroy();
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
