import { connect, type IClientOptions, type MqttClient } from 'mqtt';
import { formatSeconds } from '../../../shared/time.ts';
import type { ReadingQueue } from '../buffer/reading-queue.ts';
import type { CheckResult, IdentifyResult } from '../collector.ts';
import type { UplinkConfig } from '../config.ts';
import type { Logger } from '../logger.ts';
import type { GatewayStatus } from '../status.ts';
import { endWithin } from '../end-mqtt-client.ts';
import { buildMessages, type OutgoingMessage } from './outgoing.ts';

/** PUBACK reason codes that mean "this payload will never be accepted" (docs/api/mqtt.md). */
const PERMANENT_REFUSALS = new Set([0x83, 0x99]);
/**
 * PUBACK reason codes that mean "the cloud is busy now": 0x97 (it sheds load, or the device's rate
 * limit) and 0x80 (its database is out of reach). The connection is fine: sending pauses for a
 * backoff and resumes on it, instead of a reconnect that would cost the busy cloud a TLS handshake.
 */
const BUSY_REFUSALS = new Set([0x80, 0x97]);

export interface UplinkDeps {
  config: UplinkConfig;
  /** The gateway's own device id: MQTT client id and the device of its own last-will. */
  gatewayId: string;
  /** The gateway's software version, forwarded in its info message. */
  version: string;
  queue: ReadingQueue;
  status: GatewayStatus;
  log: Logger;
  /** Executes a `cmd/identify` downlink on the device. */
  identify: (device: string) => Promise<IdentifyResult>;
  random?: () => number;
}

interface Connection {
  client: MqttClient;
  ready: boolean;
  /** Highest queue id handed to this connection; rows above it have not been sent on it. */
  cursor: number;
  inflight: number;
  /** Paused after a busy refusal: the timer of the resume, or `idle` once due but rows are still in flight. */
  holding: NodeJS.Timeout | 'idle' | null;
  /** Dropped because the cloud refused a message on it (not authorised, topic invalid). */
  refused: boolean;
}

/** Cancels a connection's pending resume (the connection is ending). */
function clearHold(conn: Connection): void {
  if (conn.holding && conn.holding !== 'idle') clearTimeout(conn.holding);
  conn.holding = null;
}

/** An exponential backoff with jitter: `attempt` 0 waits between min/2 and min. */
function backoffMs(attempt: number, minMs: number, maxMs: number, random: () => number): number {
  const ceiling = Math.min(maxMs, minMs * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/** mqtt.js options for a mutual-TLS MQTT 5 connection with the bridge bundle. */
export function clientOptions(
  config: UplinkConfig,
  clientId: string,
  extra: Partial<IClientOptions> = {},
): IClientOptions {
  return {
    protocolVersion: 5,
    clientId,
    key: config.keyPem,
    cert: config.certPem,
    ca: config.caPem,
    rejectUnauthorized: true,
    minVersion: 'TLSv1.2',
    clean: true,
    keepalive: config.keepaliveSeconds,
    connectTimeout: config.connectTimeoutMs,
    reconnectPeriod: 0,
    ...extra,
  } as IClientOptions;
}

/**
 * The uplink to the cloud's MQTT 5 bridge (mutual TLS with the bundle of `POST /v1/bridges`).
 *
 * It drains the buffer oldest first: rows are read in id order, grouped into messages, and published
 * at QoS 1 with up to `inflight` messages awaiting their PUBACK; a row is deleted only on the
 * PUBACK of its message. New readings simply join the end of the queue, so after an outage the
 * backlog drains while fresh readings keep flowing behind it.
 *
 * Each connection is a fresh mqtt.js client with its own reconnect disabled: when a connection
 * ends, everything it had in flight is forgotten and sent again on the next one (the cloud's dedup
 * on (device, ts, channel) makes that harmless), and the next attempt waits an exponential backoff
 * with jitter. The gateway's own retained last-will announces when the uplink drops.
 */
export class Uplink {
  private conn: Connection | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private attempt = 0;
  /** Busy refusals in a row (reset by an accepted publish): the hold-off's backoff. */
  private busyAttempt = 0;
  private stopped = true;
  private readonly onAppended = () => this.pump();
  private readonly log: Logger;

  constructor(private readonly deps: UplinkDeps) {
    this.log = deps.log;
  }

  private topic(device: string, suffix = ''): string {
    return `${this.deps.config.topicRoot}${device}${suffix}`;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.deps.queue.on('appended', this.onAppended);
    this.connect();
  }

  private connect(): void {
    this.reconnectTimer = null;
    if (this.stopped) return;
    const { config, gatewayId, status } = this.deps;
    status.setUplinkState('connecting');
    const will = {
      topic: this.topic(gatewayId, '/lwt'),
      payload: Buffer.from(
        JSON.stringify({
          status: 'offline',
          reason: 'gateway connection lost',
          at: formatSeconds(Date.now() * 1000),
        }),
      ),
      qos: 1 as const,
      retain: true,
    };
    const client = connect(config.url, clientOptions(config, gatewayId, { will }));
    const conn: Connection = {
      client,
      ready: false,
      cursor: 0,
      inflight: 0,
      holding: null,
      refused: false,
    };
    this.conn = conn;
    client.on('connect', (connack) => {
      if (this.conn !== conn) return;
      conn.ready = true;
      status.uplink.connects++;
      status.setUplinkState('connected', undefined);
      this.log.info({ url: config.url, sessionPresent: connack.sessionPresent }, 'uplink connected');
      this.announce(conn);
      client.subscribe(this.topic('+', '/cmd/identify'), { qos: 1 }, (err, granted) => {
        if (err) this.log.warn({ err: err.message }, 'subscribe to cmd/identify failed');
        else this.log.debug({ granted }, 'subscribed to cmd/identify');
      });
      this.pump();
    });
    client.on('message', (topic) => {
      if (this.conn === conn) this.onDownlink(topic);
    });
    client.on('disconnect', (packet) => {
      if (this.conn !== conn) return;
      this.log.warn(
        { reasonCode: packet.reasonCode, reasonString: packet.properties?.reasonString },
        'the cloud disconnected the uplink',
      );
    });
    client.on('error', (err: Error & { code?: string | number }) => {
      if (this.conn !== conn) return;
      status.setUplinkState(
        status.uplink.state,
        `${err.message}${err.code !== undefined ? ` (${err.code})` : ''}`,
      );
      this.log.warn({ err: err.message, code: err.code }, 'uplink error');
    });
    client.on('close', () => this.dropConnection(conn, 'connection closed'));
  }

  /** Ends a connection: its in-flight messages are forgotten (sent again later), and a reconnect is planned. */
  private dropConnection(conn: Connection, why: string): void {
    if (this.conn !== conn) return;
    this.conn = null;
    this.deps.status.uplink.inflight = 0;
    // Handlers of this connection check `this.conn === conn`, so they fall silent from here on
    // (mqtt.js' own listeners must stay: removing them leaves the client unable to end). The client
    // ends on the next turn of the event loop: this often runs inside mqtt.js' own loop over its
    // in-flight messages (their callbacks, called with "Connection closed" when a keepalive times
    // out), and ending the client there empties that list under the loop, which then throws.
    setImmediate(() => conn.client.end(true));
    clearHold(conn);
    if (this.stopped) return;
    // A connection that was up and was lost starts the backoff again from its minimum; one dropped
    // because the cloud refused a message goes on growing it, so that a refusal that lasts (a
    // topic root that is not the bridge's, a bridge whose site was deleted) is asked again less and
    // less often, not every second with a TLS handshake each time.
    if (conn.ready && !conn.refused) this.attempt = 0;
    const { reconnectMinMs, reconnectMaxMs } = this.deps.config;
    const delay = backoffMs(this.attempt, reconnectMinMs, reconnectMaxMs, this.deps.random ?? Math.random);
    this.attempt++;
    this.deps.status.setUplinkState('waiting');
    this.log.info(
      { why, retryInMs: delay, attempt: this.attempt },
      'uplink down: reconnecting after backoff',
    );
    this.reconnectTimer = setTimeout(() => this.connect(), delay);
  }

  /** The gateway's own online state and info, retained, on every connect. */
  private announce(conn: Connection): void {
    const { gatewayId, version } = this.deps;
    const online = JSON.stringify({ status: 'online', at: formatSeconds(Date.now() * 1000) });
    const info = JSON.stringify({ model: 'gateway-pi', fw_version: version });
    // Info first: the message that creates the device in the cloud decides its model.
    for (const [suffix, payload] of [
      ['/info', info],
      ['/lwt', online],
    ] as const) {
      conn.client.publish(this.topic(gatewayId, suffix), payload, { qos: 1, retain: true }, (err) => {
        if (err && this.conn === conn)
          this.log.warn({ err: err.message, suffix }, 'gateway announcement refused');
      });
    }
  }

  /** Sends rows oldest first while fewer than `inflight` messages await their PUBACK. */
  private pump(): void {
    const conn = this.conn;
    if (!conn?.ready || conn.holding) return;
    const window = this.deps.config.inflight;
    // Refill at half the window, so a steady stream reads the queue in batches, not a row at a time.
    while (conn.inflight <= window / 2) {
      const rows = this.deps.queue.peek(conn.cursor, window - conn.inflight);
      if (rows.length === 0) return;
      conn.cursor = rows[rows.length - 1]!.id;
      for (const message of buildMessages(rows, this.deps.config.topicRoot)) this.publish(conn, message);
    }
  }

  private publish(conn: Connection, message: OutgoingMessage): void {
    conn.inflight++;
    this.deps.status.uplink.inflight = conn.inflight;
    conn.client.publish(message.topic, message.payload, { qos: 1, retain: message.retain }, (err, packet) => {
      if (this.conn !== conn) return; // that connection is gone; its rows are sent again on the next
      conn.inflight--;
      this.deps.status.uplink.inflight = conn.inflight;
      if (!err) {
        this.attempt = 0;
        this.deps.queue.ack(message.ids);
        this.deps.status.uplink.published++;
        if (!conn.holding) this.busyAttempt = 0;
        this.resumeIfIdle(conn);
        this.pump();
        return;
      }
      const code = (err as Error & { code?: unknown }).code;
      const reason = (packet as { properties?: { reasonString?: string } } | undefined)?.properties
        ?.reasonString;
      if (typeof code === 'number' && PERMANENT_REFUSALS.has(code)) {
        this.deps.queue.reject(message.ids, code, reason ?? err.message);
        this.deps.status.uplink.rejected++;
        this.log.warn(
          { topic: message.topic, reasonCode: code, reason, payload: message.payload },
          'the cloud refused a message for good: kept in the dead-letter table',
        );
        this.resumeIfIdle(conn);
        this.pump();
        return;
      }
      if (typeof code === 'number' && BUSY_REFUSALS.has(code)) {
        this.holdOff(conn, code, reason);
        this.resumeIfIdle(conn);
        return;
      }
      // Anything else (not authorised, a broken connection) is retried: after a backoff, on a new connection.
      this.log.warn(
        { topic: message.topic, reasonCode: code, reason, err: err.message },
        'publish failed: retrying later',
      );
      conn.refused = typeof code === 'number';
      this.dropConnection(
        conn,
        `PUBACK ${typeof code === 'number' ? `0x${code.toString(16)}` : err.message}`,
      );
    });
  }

  /**
   * The cloud refused a message as busy: sending pauses for a backoff with jitter, then starts again
   * from the oldest row still buffered once nothing is in flight (so no row is sent twice at once).
   * Refusals of other messages meanwhile fall into the same pause.
   */
  private holdOff(conn: Connection, code: number, reason: string | undefined): void {
    if (conn.holding) return;
    const { reconnectMinMs, reconnectMaxMs } = this.deps.config;
    const delay = backoffMs(
      this.busyAttempt,
      reconnectMinMs,
      reconnectMaxMs,
      this.deps.random ?? Math.random,
    );
    this.busyAttempt++;
    this.deps.status.uplink.deferrals++;
    this.log.warn(
      { reasonCode: code, reason, retryInMs: delay, attempt: this.busyAttempt },
      'the cloud is busy: sending again after a backoff',
    );
    conn.holding = setTimeout(() => {
      conn.holding = 'idle';
      this.resumeIfIdle(conn);
    }, delay);
  }

  /** Ends a hold-off whose backoff is over once the connection has nothing in flight. */
  private resumeIfIdle(conn: Connection): void {
    if (conn.holding !== 'idle' || conn.inflight > 0 || this.conn !== conn) return;
    conn.holding = null;
    conn.cursor = 0;
    this.pump();
  }

  private onDownlink(topic: string): void {
    const root = this.deps.config.topicRoot;
    if (!topic.startsWith(root) || !topic.endsWith('/cmd/identify')) return;
    const device = topic.slice(root.length, -'/cmd/identify'.length);
    this.deps.identify(device).then(
      (result) => this.log.info({ device, result }, `cmd/identify for ${device}: ${result}`),
      (err: unknown) => this.log.error({ device, err }, `cmd/identify for ${device} failed`),
    );
  }

  /** Stops sending; rows in flight stay in the queue for the next start. Safe to call twice. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.deps.queue.off('appended', this.onAppended);
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
    const conn = this.conn;
    this.conn = null;
    this.deps.status.setUplinkState('stopped');
    if (!conn) return;
    clearHold(conn);
    if (conn.ready && conn.client.connected) {
      // A clean DISCONNECT suppresses the will, so say "offline" ourselves first (bounded wait).
      const offline = JSON.stringify({
        status: 'offline',
        reason: 'gateway stopped',
        at: formatSeconds(Date.now() * 1000),
      });
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 2000);
        conn.client.publish(
          this.topic(this.deps.gatewayId, '/lwt'),
          offline,
          { qos: 1, retain: true },
          () => {
            clearTimeout(timer);
            resolve();
          },
        );
      });
    }
    await endWithin(conn.client, 2000);
  }
}

/** `--check`: one connection with the bundle, reporting the CONNACK or the error. */
export async function probeUplink(
  config: UplinkConfig,
  clientId: string,
  signal: AbortSignal,
): Promise<CheckResult> {
  const details = [
    `bridge ${config.url}, topic root ${config.topicRoot}`,
    `client certificate ${config.certSubject}, valid until ${config.certExpires}`,
  ];
  const client = connect(config.url, clientOptions(config, `${clientId}-check`));
  try {
    const outcome = await new Promise<{ ok: boolean; line: string }>((resolve) => {
      const timer = setTimeout(
        () => resolve({ ok: false, line: `no CONNACK within ${config.connectTimeoutMs} ms` }),
        config.connectTimeoutMs,
      );
      signal.addEventListener('abort', () => resolve({ ok: false, line: 'aborted' }), { once: true });
      client.once('connect', () => {
        clearTimeout(timer);
        resolve({ ok: true, line: 'connected: MQTT 5 over mutual TLS accepted' });
      });
      client.once('error', (err: Error & { code?: string | number }) => {
        clearTimeout(timer);
        resolve({
          ok: false,
          line: `refused: ${err.message}${err.code !== undefined ? ` (${err.code})` : ''}`,
        });
      });
    });
    details.push(outcome.line);
    return { ok: outcome.ok, details };
  } finally {
    await endWithin(client, 2000);
  }
}
