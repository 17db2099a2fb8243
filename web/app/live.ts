/**
 * The dashboard's live updates: one `EventSource` on `GET /app/api/stream` per tab, shared by every
 * page that listens, opened while at least one listens and closed a moment after none does (so a
 * move to another page keeps it).
 *
 * The stream sends the current view objects, as the `/app/api` reads show them: `sensor` (a sensor
 * whose value or state changed), `alarm.opened|updated|resolved|acknowledged` (the alarm event),
 * `device` (a device that went online or offline), `signed_out` (the session ended). Nothing is
 * replayed, and a page's first read may come before the cloud listens for it: at every `ready`,
 * the first included, the listeners present get `resync` and load what they show again. A listener
 * that arrives while the stream is live needs none: its own read comes after the cloud listens.
 *
 * Reconnection: the browser's `EventSource` retries on its own after a dropped connection (the
 * cloud tells it to wait 5 s). An answer other than the stream (401 after the session ended, 429
 * with too many tabs open) makes it give up; then the session is checked (a 401 there shows the
 * sign-in page) and a new stream is opened after a delay that doubles up to a minute.
 *
 * A stream can also die silently (a laptop waking up, a proxy dropping the connection without a
 * word): when `ready` announces the heartbeat's period (`heartbeat_ms`), a watchdog closes a stream
 * that has sent nothing for two periods and ten seconds (60 s for the cloud's 25 s) and opens a new
 * one. Every event counts as a sign of life, the cloud's `heartbeat` event too (its heartbeat is an
 * event because `EventSource` never shows comments to the page).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, API_BASE, ApiError } from './api.ts';
import { stamp } from './hooks.ts';
import type { AlarmEvent, Device, Sensor } from './types.ts';

export type AlarmChange = 'opened' | 'updated' | 'resolved' | 'acknowledged';

export type LiveEvent =
  | { type: 'sensor'; sensor: Sensor }
  | { type: 'alarm'; change: AlarmChange; event: AlarmEvent }
  | { type: 'device'; device: Device }
  /** The stream is (back) in place: what came before it is not sent, so load again. */
  | { type: 'resync' };

/** `connecting` until the first `ready`, `live` while open, `offline` while broken (retrying). */
export type LiveStatus = 'connecting' | 'live' | 'offline';

export const STREAM_URL = `${API_BASE}/stream`;
const ALARM_CHANGES: AlarmChange[] = ['opened', 'updated', 'resolved', 'acknowledged'];
const MIN_RETRY_MS = 2000;
const MAX_RETRY_MS = 60_000;
/** How long the stream stays open after its last listener left, for the next page to take over. */
const LINGER_MS = 5000;

/** The silence after which a stream counts as dead: two heartbeats missed, and some slack. */
export function silenceLimitMs(heartbeatMs: number): number {
  return 2 * heartbeatMs + 10_000;
}

type Listener = (e: LiveEvent) => void;
type StatusListener = (s: LiveStatus) => void;

/** What the connection needs of an `EventSource` (tests give it a fake one). */
export type StreamSource = Pick<
  EventSource,
  'addEventListener' | 'close' | 'readyState' | 'CLOSED' | 'onerror'
>;

export interface LiveOptions {
  /** Opens the stream; `new EventSource(url, {withCredentials: true})` by default. */
  open?: (url: string) => StreamSource;
  /** The watchdog's limit, instead of the one derived from `ready`'s `heartbeat_ms`. */
  silenceLimitMs?: number;
}

/** The tab's one stream and its listeners. Exported for tests of pages that want a fresh one. */
export class LiveConnection {
  private source: StreamSource | null = null;
  private readonly listeners = new Set<Listener>();
  private readonly statusListeners = new Set<StatusListener>();
  private status: LiveStatus = 'connecting';
  private retryMs = MIN_RETRY_MS;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private lingerTimer: ReturnType<typeof setTimeout> | null = null;
  /** The watchdog's limit for the open stream, once known; null: no watchdog. */
  private silenceMs: number | null = null;
  private watchdog: ReturnType<typeof setTimeout> | null = null;
  private readonly open: (url: string) => StreamSource;

  constructor(
    private readonly url: string = STREAM_URL,
    private readonly options: LiveOptions = {},
  ) {
    this.open = options.open ?? ((u) => new EventSource(u, { withCredentials: true }));
  }

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
    if (this.lingerTimer) clearTimeout(this.lingerTimer);
    this.lingerTimer = null;
    if (this.source || this.retryTimer) return;
    const source = this.open(this.url);
    this.source = source;
    const parse = <T>(m: Event): T | null => {
      try {
        return JSON.parse((m as MessageEvent).data as string) as T;
      } catch {
        return null;
      }
    };
    const on = (name: string, handle: (m: Event) => void) =>
      source.addEventListener(name, (m) => {
        if (this.source !== source) return;
        this.alive();
        handle(m);
      });
    on('ready', (m) => {
      this.retryMs = MIN_RETRY_MS;
      const heartbeatMs = parse<{ heartbeat_ms?: unknown }>(m)?.heartbeat_ms;
      this.silenceMs =
        this.options.silenceLimitMs ??
        (typeof heartbeatMs === 'number' && heartbeatMs > 0 ? silenceLimitMs(heartbeatMs) : null);
      this.alive();
      this.setStatus('live');
      this.emit({ type: 'resync' });
    });
    on('heartbeat', () => {});
    on('sensor', (m) => {
      const sensor = parse<Sensor>(m);
      if (sensor) this.emit({ type: 'sensor', sensor });
    });
    for (const change of ALARM_CHANGES) {
      on(`alarm.${change}`, (m) => {
        const event = parse<AlarmEvent>(m);
        if (event) this.emit({ type: 'alarm', change, event });
      });
    }
    on('device', (m) => {
      const device = parse<Device>(m);
      if (device) this.emit({ type: 'device', device });
    });
    on('signed_out', () => {
      this.drop();
      // The session check answers 401, which tells the app to show the sign-in page.
      void this.checkSession();
    });
    source.onerror = () => {
      if (this.source !== source) return;
      this.stopWatchdog();
      this.setStatus('offline');
      // CONNECTING: the browser retries by itself. CLOSED: it gave up (an answer that was not the
      // stream); find out why and try again later.
      if (source.readyState === source.CLOSED) {
        this.drop();
        void this.checkSession().then((signedIn) => {
          if (signedIn) this.scheduleRetry();
        });
      }
    };
  }

  /** A sign of life from the stream: the watchdog starts counting again. */
  private alive(): void {
    this.stopWatchdog();
    if (this.silenceMs === null) return;
    this.watchdog = setTimeout(() => {
      this.watchdog = null;
      // Nothing for too long: the connection is dead without having said so. A new stream
      // replaces it, and its `ready` makes the pages load again.
      this.drop();
      this.setStatus('offline');
      if (!this.unused()) this.ensureOpen();
    }, this.silenceMs);
  }

  private stopWatchdog(): void {
    if (this.watchdog) clearTimeout(this.watchdog);
    this.watchdog = null;
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
    this.stopWatchdog();
    this.silenceMs = null;
    this.source?.close();
    this.source = null;
  }

  private unused(): boolean {
    return this.listeners.size === 0 && this.statusListeners.size === 0;
  }

  private closeIfUnused(): void {
    if (!this.unused() || this.lingerTimer) return;
    this.lingerTimer = setTimeout(() => {
      this.lingerTimer = null;
      if (!this.unused()) return;
      this.drop();
      if (this.retryTimer) clearTimeout(this.retryTimer);
      this.retryTimer = null;
      this.status = 'connecting';
    }, LINGER_MS);
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
 * Keeps the newest copy of each object that arrives live, by id, to lay over what a page loaded.
 * A copy wins over the loaded object only when it arrived after the read that loaded it began
 * (`Loaded.loadedAt`): a reload that answers replaces older copies, and one that fails leaves the
 * newest copies on screen rather than the older answer beneath them.
 */
export function useLiveCopies<T extends { id: string }>() {
  const [copies, setCopies] = useState<ReadonlyMap<string, { item: T; at: number }>>(new Map());
  const get = (item: T, loadedAt: number): T => {
    const copy = copies.get(item.id);
    return copy && copy.at > loadedAt ? copy.item : item;
  };
  return {
    put: (item: T) => {
      const at = stamp();
      setCopies((m) => new Map(m).set(item.id, { item, at }));
    },
    get,
    patched: (list: readonly T[], loadedAt: number): T[] => list.map((x) => get(x, loadedAt)),
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
