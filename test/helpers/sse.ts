import { eventually } from './eventually.ts';

/** One Server-Sent Event as received (`data` parsed as JSON). */
export interface SseEvent {
  event: string;

  data: any;
}

/**
 * A Server-Sent Events client over a real socket (fetch, as a browser's EventSource would ask):
 * events are collected as they arrive; `waitFor` resolves with the first not yet taken that matches.
 */
export class SseClient {
  readonly events: SseEvent[] = [];
  /** Comments (heartbeats) received. */
  comments = 0;
  ended = false;
  private taken = new Set<number>();
  private readonly abort = new AbortController();

  private constructor(
    readonly status: number,
    readonly headers: Headers,
    readonly text: string,
  ) {}

  static async open(url: string, headers: Record<string, string>): Promise<SseClient> {
    const abort = new AbortController();
    const response = await fetch(url, {
      headers: { accept: 'text/event-stream', ...headers },
      signal: abort.signal,
    });
    if (response.status !== 200) {
      return new SseClient(response.status, response.headers, await response.text());
    }
    const client = new SseClient(response.status, response.headers, '');
    client.abort.signal.addEventListener('abort', () => abort.abort());
    void client.read(response.body!);
    return client;
  }

  private async read(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of body) {
        buffer += decoder.decode(chunk, { stream: true });
        let split: number;
        while ((split = buffer.indexOf('\n\n')) >= 0) {
          this.parse(buffer.slice(0, split));
          buffer = buffer.slice(split + 2);
        }
      }
    } catch {
      // aborted by close()
    } finally {
      this.ended = true;
    }
  }

  private parse(block: string): void {
    let event = 'message';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) this.comments++;
      else if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data.push(line.slice(6));
    }
    if (data.length > 0) this.events.push({ event, data: JSON.parse(data.join('\n')) });
  }

  /** The first event not yet taken with this name (and matching `where`). */
  waitFor(event: string, where: (data: any) => boolean = () => true, ms = 10_000): Promise<SseEvent> {
    return eventually(
      () => {
        const i = this.events.findIndex((e, n) => !this.taken.has(n) && e.event === event && where(e.data));
        if (i < 0) return null;
        this.taken.add(i);
        return this.events[i]!;
      },
      `the event ${event}`,
      ms,
    );
  }

  /** Resolves once the server has ended the stream. */
  whenEnded(ms = 10_000): Promise<true> {
    return eventually(() => this.ended, 'the end of the stream', ms);
  }

  close(): void {
    this.abort.abort();
  }
}
