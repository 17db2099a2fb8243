import type http from 'node:http';
import type { Socket } from 'node:net';

/**
 * Unanswered requests a connection may have before the server stops reading from it. Devices send
 * one request at a time; only a pipelining client goes past this. HTTP/1.1 answers a connection's
 * requests in order, so every request read behind one still waiting for its ingest group is held in
 * memory, answered or not, until the answers ahead of it are written: without a bound, one pipelining
 * client holds as many requests as it sends. Node stops reading by itself only once 16 KiB of
 * answers wait to be written, which requests accepted and waiting for their group never produce.
 */
export const PIPELINE_DEPTH = 64;

/**
 * The server's connections and the requests each has unanswered: a connection that pipelines past
 * PIPELINE_DEPTH is paused (its further requests wait in the operating system's buffers and the
 * client's) until half of them are answered; while stopping, connections with nothing unanswered are
 * closed at once. Node parses a whole read (up to 64 KiB) at a time, so a paused connection holds at
 * most PIPELINE_DEPTH plus one read's worth of requests.
 */
export class Connections {
  /** Every open connection, with the number of its requests not yet answered. */
  private readonly open = new Map<Socket, number>();
  private readonly paused = new Set<Socket>();
  /** Connections paused for pipelining past PIPELINE_DEPTH, since the start. */
  pauses = 0;

  constructor(private readonly depth = PIPELINE_DEPTH) {}

  track(server: http.Server): void {
    server.on('connection', (socket: Socket) => {
      this.open.set(socket, 0);
      socket.once('close', () => {
        this.open.delete(socket);
        this.paused.delete(socket);
      });
      // Node resumes a connection by itself whenever its queued answers fall under 16 KiB (an answer
      // written behind one still waiting does that): a connection paused here is paused again.
      // This listener runs after Node's own, which has just restarted reading.
      socket.on('resume', () => {
        if (this.paused.has(socket) && !socket.destroyed) pause(socket);
      });
    });
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      const socket = req.socket;
      const count = (this.open.get(socket) ?? 0) + 1;
      this.open.set(socket, count);
      if (count > this.depth && !this.paused.has(socket)) {
        this.paused.add(socket);
        this.pauses++;
        pause(socket);
      }
      // 'close' follows the answer's end, or the connection's loss before it.
      res.once('close', () => this.answered(socket));
    });
  }

  private answered(socket: Socket): void {
    const count = this.open.get(socket);
    if (count === undefined) return;
    this.open.set(socket, count - 1);
    if (count - 1 <= this.depth / 2 && this.paused.delete(socket) && !socket.destroyed) resume(socket);
  }

  /** Requests read and not yet answered, on every connection. */
  get held(): number {
    let n = 0;
    for (const count of this.open.values()) n += count;
    return n;
  }

  /** Closes every connection with no request waiting for its answer. */
  closeUnbusy(): void {
    for (const [socket, count] of this.open) if (count <= 0) socket.destroy();
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
