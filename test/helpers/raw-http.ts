import net from 'node:net';

/** One HTTP/1.1 answer as read off the wire. */
export interface RawAnswer {
  status: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  body: string;
}

/**
 * A raw TCP connection to an HTTP server, for what `fetch` cannot do: pipelining, requests cut short,
 * answers the server writes before it reads. Answers are parsed as they arrive (Content-Length
 * bodies only, which is what the cloud sends) and kept in order.
 */
export class RawHttpConnection {
  readonly socket: net.Socket;
  readonly answers: RawAnswer[] = [];
  /** Resolves once the server has closed the connection (or it failed). */
  readonly closed: Promise<void>;
  private buffered = '';
  private waiters: { n: number; resolve: () => void }[] = [];

  /** `allowHalfOpen`: the connection stays writable after the server has ended its side. */
  constructor(port: number, options: { allowHalfOpen?: boolean } = {}) {
    this.socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: options.allowHalfOpen ?? false });
    this.socket.setEncoding('latin1');
    this.socket.on('data', (chunk: string) => this.read(chunk));
    this.closed = new Promise((resolve) => this.socket.once('close', () => resolve()));
    this.socket.on('error', () => undefined);
  }

  /** Resolves once connected (its local port is known then). */
  connected(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.socket.once('connect', resolve);
      this.socket.once('error', reject);
    });
  }

  write(data: string): void {
    this.socket.write(data, 'latin1');
  }

  /** Resolves once `n` answers have been read in all. */
  answered(n: number): Promise<void> {
    if (this.answers.length >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }

  close(): void {
    this.socket.destroy();
  }

  private read(chunk: string): void {
    this.buffered += chunk;
    for (;;) {
      const end = this.buffered.indexOf('\r\n\r\n');
      if (end < 0) break;
      const head = this.buffered.slice(0, end).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of head.slice(1)) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const length = Number(headers['content-length'] ?? 0);
      if (this.buffered.length < end + 4 + length) break;
      this.answers.push({
        status: Number(head[0]!.slice(9, 12)),
        headers,
        body: Buffer.from(this.buffered.slice(end + 4, end + 4 + length), 'latin1').toString('utf8'),
      });
      this.buffered = this.buffered.slice(end + 4 + length);
    }
    this.waiters = this.waiters.filter((w) => (this.answers.length >= w.n ? (w.resolve(), false) : true));
  }
}
