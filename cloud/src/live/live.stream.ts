import type { Request, Response } from 'express';
import { deviceView } from '../devices/devices.view.ts';
import type { DevicesService } from '../devices/devices.service.ts';
import { ApiError, RateLimited, Unauthenticated } from '../errors.ts';
import type { EventsService } from '../events/events.service.ts';
import { anyEventView } from '../events/events.view.ts';
import type { UserPrincipal } from '../http/context.ts';
import { accountTopic, type HubMessage, type NotificationHub } from '../hub/notification-hub.ts';
import type { PublicDeviceRow } from '../public/public.repository.ts';
import type { Logger } from '../logger.ts';
import type { SensorsService } from '../sensors/sensors.service.ts';
import { sensorView } from '../sensors/sensors.view.ts';
import type { AlarmChange, LiveMessage } from './live.service.ts';

/** A heartbeat event this often keeps proxies from closing an idle stream; sessions are checked then too. */
export const HEARTBEAT_MS = 25_000;
/** Open streams per account (a few people with a few tabs each); one more is 429 `rate_limited`. */
export const MAX_STREAMS_PER_ACCOUNT = 20;
/** Changes arriving within this long are sent together (one read per kind). */
const FLUSH_DELAY_MS = 50;
/**
 * What a client may leave unread before its stream is closed (it reconnects and refetches); with
 * LIVE_MAX_STREAMS it bounds what the streams of a process hold.
 */
export const MAX_BUFFERED_BYTES = 1 << 20;
/** The reconnection delay `EventSource` is told to use. */
const RETRY_MS = 5000;

type SessionPrincipal = Extract<UserPrincipal, { kind: 'session' }>;

export interface LiveStreamsDeps {
  hub: NotificationHub;
  log: Logger;
  sensors: Pick<SensorsService, 'getMany' | 'alertSeverities'>;
  events: Pick<EventsService, 'get'>;
  devices: Pick<DevicesService, 'get'>;
  /** What the owners publish of these devices (`PublicService.settingsOf`), for the device object. */
  publicSettings: (deviceIds: string[]) => Promise<Map<string, PublicDeviceRow>>;
  /** When the session ends at the latest, or null once it has (`AuthService.liveSessionEnd`). */
  sessionEnd: (sessionId: string) => Promise<number | null>;
  nowMicros: () => number;
  /** Streams of all accounts together (LIVE_MAX_STREAMS); one more is 503 `overloaded`. */
  maxStreams: number;
}

/**
 * The dashboard's open event streams (`GET /app/api/stream`, docs/api/dashboard.md): at most
 * MAX_STREAMS_PER_ACCOUNT per account and `maxStreams` in all, a heartbeat for all of them, each
 * closed when its session ends (sign-out at once, expiry at the next heartbeat) and all closed when
 * the cloud stops.
 */
export class LiveStreams {
  private readonly streams = new Set<LiveStream>();
  private readonly perAccount = new Map<string, number>();
  private heartbeat: NodeJS.Timeout | null = null;

  constructor(private readonly deps: LiveStreamsDeps) {}

  /** Opens a stream on `res` for the session, or throws the error the request is answered with. */
  async open(principal: SessionPrincipal, req: Request, res: Response): Promise<void> {
    this.refuseOverBound(principal.accountId);
    if ((await this.deps.sessionEnd(principal.sessionId)) === null) {
      throw new Unauthenticated('auth_required', 'sign in first: the session has ended');
    }
    // counted again: other streams of the account may have opened while the session was read
    const count = this.refuseOverBound(principal.accountId);
    const stream = new LiveStream(principal, req, res, this.deps, () => this.forget(stream));
    this.streams.add(stream);
    this.perAccount.set(principal.accountId, count + 1);
    if (!this.heartbeat) {
      this.heartbeat = setInterval(() => void this.checkSessions(), HEARTBEAT_MS);
      this.heartbeat.unref();
    }
    stream.start();
  }

  /** The account's open streams; 429 when it has its bound already, 503 when the process has. */
  private refuseOverBound(accountId: string): number {
    if (this.streams.size >= this.deps.maxStreams) throw streamsFull();
    const count = this.perAccount.get(accountId) ?? 0;
    if (count >= MAX_STREAMS_PER_ACCOUNT) {
      throw new RateLimited(
        Math.ceil(HEARTBEAT_MS / 1000),
        `at most ${MAX_STREAMS_PER_ACCOUNT} open streams per account`,
      );
    }
    return count;
  }

  /** Open streams (of one account, when given). */
  count(accountId?: string): number {
    return accountId === undefined ? this.streams.size : (this.perAccount.get(accountId) ?? 0);
  }

  /**
   * The heartbeat: a comment on every stream, and the end of those whose session has ended (tests
   * call it after moving the clock instead of waiting).
   */
  async checkSessions(): Promise<void> {
    await Promise.all([...this.streams].map((s) => s.beat()));
  }

  /** Ends every stream (the cloud is stopping: the HTTP server waits for open responses). */
  /** Streams open now (read by `GET /metrics`). */
  get size(): number {
    return this.streams.size;
  }

  closeAll(): void {
    for (const stream of [...this.streams]) stream.close();
  }

  private forget(stream: LiveStream): void {
    if (!this.streams.delete(stream)) return;
    const { accountId } = stream.principal;
    const left = (this.perAccount.get(accountId) ?? 1) - 1;
    if (left > 0) this.perAccount.set(accountId, left);
    else this.perAccount.delete(accountId);
    if (this.streams.size === 0 && this.heartbeat) {
      clearInterval(this.heartbeat);
      this.heartbeat = null;
    }
  }
}

/**
 * One open stream. Hub messages name what changed; they are gathered for FLUSH_DELAY_MS, then the
 * current view objects are read as the `/v1` reads show them (sensors brought up to date first) and
 * written as events. A sensor whose view has not changed since it was last sent is not sent again.
 */
class LiveStream {
  private readonly sensors = new Set<string>();
  private readonly alarms = new Map<string, Set<AlarmChange>>();
  private readonly devices = new Set<string>();
  private readonly sentSensors = new Map<string, string>();
  private flushTimer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private unsubscribe: (() => void) | null = null;
  private ended = false;

  constructor(
    readonly principal: SessionPrincipal,
    private readonly req: Request,
    private readonly res: Response,
    private readonly deps: LiveStreamsDeps,
    private readonly onEnd: () => void,
  ) {}

  start(): void {
    const { res, req, principal } = this;
    req.socket.setTimeout(0);
    req.socket.setNoDelay(true);
    res.status(200).set({
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      // nginx and similar proxies pass each event on at once instead of buffering the answer
      'X-Accel-Buffering': 'no',
    });
    res.flushHeaders();
    res.on('close', () => this.close());
    // Subscribed before `ready` is sent: every change after `ready` reaches this stream.
    this.unsubscribe = this.deps.hub.subscribe(accountTopic(principal.accountId), (m) => this.heard(m));
    this.write(`retry: ${RETRY_MS}\n\n`);
    this.send(
      'ready',
      JSON.stringify({
        account_id: principal.accountId,
        user_id: principal.userId,
        heartbeat_ms: HEARTBEAT_MS,
      }),
    );
  }

  private heard(message: HubMessage): void {
    const m = message as LiveMessage;
    switch (m.type) {
      case 'sensors.changed':
        for (const id of m.ids) this.sensors.add(id);
        break;
      case 'alarm.changed': {
        const changes = this.alarms.get(m.id) ?? new Set<AlarmChange>();
        changes.add(m.change);
        this.alarms.set(m.id, changes);
        break;
      }
      case 'device.changed':
        this.devices.add(m.id);
        break;
      case 'sessions.ended':
        if (
          m.userId === this.principal.userId &&
          (m.sessionId ?? this.principal.sessionId) === this.principal.sessionId
        )
          this.signOut();
        return;
      default:
        return;
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.flushTimer || this.ended) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = null;
      // A failed read loses the changes it was to send (their ids are taken): the stream is closed,
      // so the browser reconnects and, at its `ready`, loads what it shows again.
      this.flushing = this.flushing
        .then(() => this.flush())
        .catch((err: unknown) => {
          this.deps.log.error({ err }, 'live stream update failed; closing the stream so the client reloads');
          this.close();
        });
    }, FLUSH_DELAY_MS);
  }

  private async flush(): Promise<void> {
    if (this.ended) return;
    const { accountId } = this.principal;
    const sensorIds = [...this.sensors];
    const alarms = [...this.alarms];
    const deviceIds = [...this.devices];
    this.sensors.clear();
    this.alarms.clear();
    this.devices.clear();
    if (sensorIds.length > 0) {
      const rows = await this.deps.sensors.getMany(accountId, sensorIds);
      const severities = await this.deps.sensors.alertSeverities(rows.map((r) => r.seq));
      for (const row of rows) {
        const json = JSON.stringify(sensorView(row, severities.get(row.seq) ?? null));
        if (this.sentSensors.get(row.id) === json) continue;
        this.sentSensors.set(row.id, json);
        this.send('sensor', json);
      }
    }
    for (const [id, changes] of alarms) {
      const event = await gone(() => this.deps.events.get(accountId, id));
      if (!event) continue;
      const json = JSON.stringify(anyEventView(event));
      for (const change of changes) this.send(`alarm.${change}`, json);
    }
    // The device object as `GET /v1/devices/{id}` answers it, its public settings included.
    const published =
      deviceIds.length > 0 ? await this.deps.publicSettings(deviceIds) : new Map<string, PublicDeviceRow>();
    for (const id of deviceIds) {
      const device = await gone(() => this.deps.devices.get(accountId, id));
      if (device) this.send('device', JSON.stringify(deviceView(device, published.get(id))));
    }
  }

  /**
   * The heartbeat: an event (a comment would keep proxies from closing the stream too, but
   * `EventSource` hides comments, and the dashboard tells a dead stream by the missing heartbeat),
   * and the end of the stream when its session has ended.
   */
  async beat(): Promise<void> {
    if (this.ended) return;
    this.send('heartbeat', '{}');
    try {
      const end = await this.deps.sessionEnd(this.principal.sessionId);
      if (end === null || end <= this.deps.nowMicros()) this.signOut();
    } catch (err) {
      this.deps.log.error({ err }, 'live stream session check failed');
    }
  }

  /** Tells the client its session has ended (it shows the sign-in page), then closes. */
  private signOut(): void {
    if (this.ended) return;
    this.send('signed_out', '{}');
    this.close();
  }

  close(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.unsubscribe?.();
    if (!this.res.writableEnded) this.res.end();
    this.onEnd();
  }

  private send(event: string, json: string): void {
    this.write(`event: ${event}\ndata: ${json}\n\n`);
  }

  private write(chunk: string): void {
    if (this.ended) return;
    if (this.res.writableLength > MAX_BUFFERED_BYTES) {
      this.deps.log.warn({ account_id: this.principal.accountId }, 'live stream not read: closed');
      this.close();
      return;
    }
    this.res.write(chunk);
  }
}

/** The answer when the process holds `maxStreams`: not the client's doing, so 503, not 429. */
function streamsFull(): ApiError {
  return new ApiError(
    503,
    'overloaded',
    'the service holds as many live streams as it can; the dashboard tries again',
    undefined,
    { 'Retry-After': String(Math.ceil(HEARTBEAT_MS / 1000)) },
  );
}

/** The value, or null when it is 404 now (deleted since the change was published). */
async function gone<T>(read: () => Promise<T>): Promise<T | null> {
  try {
    return await read();
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return null;
    throw err;
  }
}
