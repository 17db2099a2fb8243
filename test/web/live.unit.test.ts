import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { LiveConnection, silenceLimitMs, type LiveEvent, type LiveStatus } from '../../web/app/live.ts';

/** A stand-in for the browser's `EventSource`: the test plays the server's side. */
class FakeSource {
  static readonly CLOSED = 2;
  static opened: FakeSource[] = [];
  readonly CLOSED = 2;
  readyState = 0;
  onerror: ((e: Event) => void) | null = null;
  private readonly handlers = new Map<string, ((e: Event) => void)[]>();

  constructor(readonly url: string) {
    FakeSource.opened.push(this);
  }

  addEventListener(name: string, handler: (e: Event) => void): void {
    this.handlers.set(name, [...(this.handlers.get(name) ?? []), handler]);
  }

  close(): void {
    this.readyState = 2;
  }

  /** The server sends an event. */
  send(name: string, data: unknown = {}): void {
    for (const h of this.handlers.get(name) ?? []) h({ data: JSON.stringify(data) } as MessageEvent as Event);
  }
}

const latest = () => FakeSource.opened[FakeSource.opened.length - 1]!;

/** A connection on the fake, with what its listener heard. */
function connect(options: { silenceLimitMs?: number } = {}) {
  const conn = new LiveConnection('/stream', {
    open: (url) => new FakeSource(url) as unknown as EventSource,
    ...options,
  });
  const events: LiveEvent['type'][] = [];
  const statuses: LiveStatus[] = [];
  const stop = conn.subscribe((e) => events.push(e.type));
  const unwatch = conn.watchStatus((s) => statuses.push(s));
  return { conn, events, statuses, stop, unwatch };
}

describe('the live connection', () => {
  beforeEach(() => {
    jest.useFakeTimers();
    FakeSource.opened = [];
    // Where the connection opens the browser's EventSource itself, it gets the fake too.
    (globalThis as { EventSource?: unknown }).EventSource = FakeSource;
  });
  afterEach(() => {
    jest.useRealTimers();
    delete (globalThis as { EventSource?: unknown }).EventSource;
  });

  it('tells the listeners present at the first ready to load again: their reads may predate it', () => {
    const { events } = connect();
    expect(FakeSource.opened).toHaveLength(1);
    latest().send('ready', { account_id: 'acc', user_id: 'usr' });
    expect(events).toEqual(['resync']);
  });

  it('tells a listener that came while the stream was live nothing until the next ready', () => {
    const { conn, events } = connect();
    latest().send('ready');
    const later: string[] = [];
    conn.subscribe((e) => later.push(e.type));
    latest().send('sensor', { id: 'snr_1' });
    expect(later).toEqual(['sensor']);
    latest().send('ready');
    expect(later).toEqual(['sensor', 'resync']);
    expect(events).toEqual(['resync', 'sensor', 'resync']);
  });

  it('derives a watchdog of about a minute from the heartbeat the server announces', () => {
    expect(silenceLimitMs(25_000)).toBe(60_000);
  });

  it('replaces a stream that stays silent past two heartbeats, and loads again when the new one is ready', () => {
    const { events, statuses } = connect();
    const first = latest();
    first.send('ready', { account_id: 'acc', user_id: 'usr', heartbeat_ms: 25_000 });
    expect(statuses.at(-1)).toBe('live');
    // Heartbeats and events keep it: each starts the count again.
    jest.advanceTimersByTime(50_000);
    first.send('heartbeat');
    jest.advanceTimersByTime(50_000);
    first.send('sensor', { id: 'snr_1' });
    jest.advanceTimersByTime(59_000);
    expect(FakeSource.opened).toHaveLength(1);
    expect(statuses.at(-1)).toBe('live');

    // Then nothing: the connection died without a word.
    jest.advanceTimersByTime(1_000);
    expect(first.readyState).toBe(FakeSource.CLOSED);
    expect(statuses.at(-1)).toBe('offline');
    expect(FakeSource.opened).toHaveLength(2);
    // The dead stream's late events are not heard.
    first.send('sensor', { id: 'snr_2' });
    expect(events).toEqual(['resync', 'sensor']);

    latest().send('ready', { account_id: 'acc', user_id: 'usr', heartbeat_ms: 25_000 });
    expect(statuses.at(-1)).toBe('live');
    expect(events).toEqual(['resync', 'sensor', 'resync']);
  });

  it('takes a watchdog limit given to it over the announced one', () => {
    const { statuses } = connect({ silenceLimitMs: 1_000 });
    latest().send('ready');
    jest.advanceTimersByTime(1_000);
    expect(statuses.at(-1)).toBe('offline');
    expect(FakeSource.opened).toHaveLength(2);
  });

  it('keeps a quiet stream of a server that announces no heartbeat events (its comments are invisible)', () => {
    const { statuses } = connect();
    latest().send('ready', { account_id: 'acc', user_id: 'usr' });
    jest.advanceTimersByTime(10 * 60_000);
    expect(FakeSource.opened).toHaveLength(1);
    expect(statuses.at(-1)).toBe('live');
  });

  it('closes the stream a moment after the last listener leaves, and keeps it for one that comes meanwhile', () => {
    const { conn, stop, unwatch } = connect();
    latest().send('ready');
    stop();
    unwatch();
    const next: string[] = [];
    const again = conn.subscribe((e) => next.push(e.type));
    jest.advanceTimersByTime(60_000);
    expect(FakeSource.opened).toHaveLength(1);
    expect(latest().readyState).not.toBe(FakeSource.CLOSED);
    again();
    jest.advanceTimersByTime(60_000);
    expect(latest().readyState).toBe(FakeSource.CLOSED);
  });
});
