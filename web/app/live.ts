/**
 * The dashboard's live updates: one `EventSource` on `GET /app/api/stream` per tab, shared by every
 * page that listens, opened while at least one listens and closed when none does.
 *
 * The stream sends the current view objects, as the `/app/api` reads show them: `sensor` (a sensor
 * whose value or state changed), `alarm.opened|updated|resolved|acknowledged` (the alarm event),
 * `device` (a device that went online or offline), `signed_out` (the session ended). Nothing is
 * replayed after a break, so when the stream comes back after one, listeners get `resync` and
 * load what they show again.
 *
 * Reconnection: the browser's `EventSource` retries on its own after a dropped connection (the
 * cloud tells it to wait 5 s). An answer other than the stream (401 after the session ended, 429
 * with too many tabs open) makes it give up; then the session is checked (a 401 there shows the
 * sign-in page) and a new stream is opened after a delay that doubles up to a minute.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, API_BASE, ApiError } from './api.ts';
import type { AlarmEvent, Device, Sensor } from './types.ts';

export type AlarmChange = 'opened' | 'updated' | 'resolved' | 'acknowledged';

export type LiveEvent =
  | { type: 'sensor'; sensor: Sensor }
  | { type: 'alarm'; change: AlarmChange; event: AlarmEvent }
  | { type: 'device'; device: Device }
  /** The stream is back after a break: what was missed is not sent, so load again. */
  | { type: 'resync' };

/** `connecting` until the first `ready`, `live` while open, `offline` while broken (retrying). */
export type LiveStatus = 'connecting' | 'live' | 'offline';

export const STREAM_URL = `${API_BASE}/stream`;
const ALARM_CHANGES: AlarmChange[] = ['opened', 'updated', 'resolved', 'acknowledged'];
const MIN_RETRY_MS = 2000;
const MAX_RETRY_MS = 60_000;

type Listener = (e: LiveEvent) => void;
type StatusListener = (s: LiveStatus) => void;

/** The tab's one stream and its listeners. Exported for tests of pages that want a fresh one. */
export class LiveConnection {
  private source: EventSource | null = null;
  private readonly listeners = new Set<Listener>();
  private readonly statusListeners = new Set<StatusListener>();
  private status: LiveStatus = 'connecting';
  /** Whether a `ready` was seen before: a later `ready` follows a break. */
  private wasReady = false;
  private retryMs = MIN_RETRY_MS;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(private readonly url: string = STREAM_URL) {}

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    this.ensureOpen();
    return () => {
      this.listeners.delete(listener);
      this.closeIfUnused();
    };
  }

  watchStatus(listener: StatusListener): () => void {
    this.statusListeners.add(listener);
    listener(this.status);
    this.ensureOpen();
    return () => {
      this.statusListeners.delete(listener);
      this.closeIfUnused();
    };
  }

  get currentStatus(): LiveStatus {
    return this.status;
  }

  private setStatus(status: LiveStatus): void {
    if (status === this.status) return;
    this.status = status;
    for (const l of this.statusListeners) l(status);
  }

  private emit(e: LiveEvent): void {
    for (const l of [...this.listeners]) {
      try {
        l(e);
      } catch (err) {
        console.error('live listener failed', err);
      }
    }
  }

  private ensureOpen(): void {
    if (this.source || this.retryTimer) return;
    const source = new EventSource(this.url, { withCredentials: true });
    this.source = source;
    const parse = <T>(m: MessageEvent): T | null => {
      try {
        return JSON.parse(m.data as string) as T;
      } catch {
        return null;
      }
    };
    source.addEventListener('ready', () => {
      this.retryMs = MIN_RETRY_MS;
      this.setStatus('live');
      if (this.wasReady) this.emit({ type: 'resync' });
      this.wasReady = true;
    });
    source.addEventListener('sensor', (m) => {
      const sensor = parse<Sensor>(m);
      if (sensor) this.emit({ type: 'sensor', sensor });
    });
    for (const change of ALARM_CHANGES) {
      source.addEventListener(`alarm.${change}`, (m) => {
        const event = parse<AlarmEvent>(m);
        if (event) this.emit({ type: 'alarm', change, event });
      });
    }
    source.addEventListener('device', (m) => {
      const device = parse<Device>(m);
      if (device) this.emit({ type: 'device', device });
    });
    source.addEventListener('signed_out', () => {
      this.drop();
      // The session check answers 401, which tells the app to show the sign-in page.
      void this.checkSession();
    });
    source.onerror = () => {
      this.setStatus('offline');
      // CONNECTING: the browser retries by itself. CLOSED: it gave up (an answer that was not the
      // stream); find out why and try again later.
      if (source.readyState === EventSource.CLOSED) {
        this.drop();
        void this.checkSession().then((signedIn) => {
          if (signedIn) this.scheduleRetry();
        });
      }
    };
  }

  /** True when the session still holds (a 401 makes `api` tell the app it ended). */
  private async checkSession(): Promise<boolean> {
    try {
      await api.get('/accounts/me');
      return true;
    } catch (e) {
      return !(e instanceof ApiError && e.status === 401);
    }
  }

  private scheduleRetry(): void {
    if (this.retryTimer || this.unused()) return;
    const delay = this.retryMs;
    this.retryMs = Math.min(MAX_RETRY_MS, this.retryMs * 2);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (!this.unused()) this.ensureOpen();
    }, delay);
  }

  private drop(): void {
    this.source?.close();
    this.source = null;
  }

  private unused(): boolean {
    return this.listeners.size === 0 && this.statusListeners.size === 0;
  }

  private closeIfUnused(): void {
    if (!this.unused()) return;
    this.drop();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    // The next listener opens a fresh stream; the pages load what they show anyway.
    this.wasReady = false;
    this.status = 'connecting';
  }
}

/** The tab's stream. */
export const live = new LiveConnection();

/**
 * Calls `handler` with each live event while the component is mounted. The latest `handler` is
 * used (no need to memoise it). Answers the stream's status, for an indicator.
 */
export function useLive(handler: (e: LiveEvent) => void): LiveStatus {
  const ref = useRef(handler);
  ref.current = handler;
  const [status, setStatus] = useState<LiveStatus>(live.currentStatus);
  useEffect(() => {
    const unsubscribe = live.subscribe((e) => ref.current(e));
    const unwatch = live.watchStatus(setStatus);
    return () => {
      unsubscribe();
      unwatch();
    };
  }, []);
  return status;
}

/**
 * Keeps the newest copy of each object that arrives live, by id, to lay over what a page loaded:
 * `patched(list)` answers the list with every object replaced by its live copy. `reset()` forgets
 * them (after the page loads again).
 */
export function useLiveCopies<T extends { id: string }>() {
  const [copies, setCopies] = useState<ReadonlyMap<string, T>>(new Map());
  return {
    copies,
    put: (item: T) =>
      setCopies((m) => {
        const next = new Map(m);
        next.set(item.id, item);
        return next;
      }),
    reset: () => setCopies(new Map()),
    patched: (list: readonly T[]): T[] => list.map((x) => copies.get(x.id) ?? x),
    get: (item: T): T => copies.get(item.id) ?? item,
  };
}

/** A small "Live" / "Reconnecting…" indicator for a page's head. */
export function liveLabel(status: LiveStatus): string {
  return status === 'live' ? 'Live' : status === 'connecting' ? 'Connecting…' : 'Reconnecting…';
}

/** The time now, renewed every `everyMs`, so "5 s ago" keeps telling the truth on a page left open. */
export function useNow(everyMs = 15_000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(timer);
  }, [everyMs]);
  return now;
}
