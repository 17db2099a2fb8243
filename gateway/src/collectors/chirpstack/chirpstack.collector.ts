import fs from 'node:fs';
import { connect, type IClientOptions, type MqttClient } from 'mqtt';
import { backoffDelay } from '../../backoff.ts';
import type { CheckResult, Collector, CollectorDeps, IdentifyResult } from '../../collector.ts';
import type { ChirpstackConfig } from '../../config.ts';
import { endWithin } from '../../end-mqtt-client.ts';
import { ReadingRefused } from '../../reading.ts';
import { validateMeasurement } from '../../../../shared/ingest.ts';
import {
  parseUplinkEvent,
  UplinkEventError,
  type UplinkEventData,
} from '../../../../shared/lorawan/chirpstack-events.ts';
import { measurementsFromObject } from '../../../../shared/lorawan/decoded-object.ts';
import { decodePayload, decoderForModel } from '../../../../shared/lorawan/payload-decoders.ts';

const UP_TOPIC = /^application\/([^/]+)\/device\/([0-9a-fA-F]{16})\/event\/up$/;

/**
 * LoRaWAN: a subscriber to a ChirpStack v4 MQTT integration (`application/<app>/device/+/event/up`,
 * JSON or protobuf). The decoded `object` is mapped to measurements (shared/lorawan/decoded-object.ts,
 * the same map as the cloud's webhooks); without one, `data` is decoded here with the device's
 * configured decoder, else its model's (shared/lorawan/payload-decoders.ts). The uplink's
 * best RSSI becomes a `signal` measurement; the reading's time is the network server's receive time
 * (`time`), the closest the event carries to when the sensor measured.
 *
 * The subscription is QoS 1 with a persistent session, and a message is acknowledged only after its
 * reading is buffered: when the buffer refuses it, the connection is dropped without a PUBACK and
 * the broker delivers it again after the reconnect.
 *
 * Reconnects are the collector's, not mqtt.js's fixed period: after a lost or failed connection the
 * next attempt waits an exponential backoff with jitter (`reconnect_min_ms` doubling up to
 * `reconnect_max_ms`, backoff.ts), reset by a successful CONNACK, so a broker that is down for
 * hours is not hammered every few seconds by every gateway at once.
 */
export class ChirpstackCollector implements Collector {
  readonly name = 'chirpstack';
  private client: MqttClient | null = null;
  /** DevEUI → application id, learnt from uplink topics (needed to address a downlink). */
  private readonly applications = new Map<string, string>();
  private reconnectTimer: NodeJS.Timeout | null = null;
  /**
   * Attempts since the backoff last started again: from its minimum after a connection that was up
   * is lost, or an uplink is accepted; growing after connections dropped for a refused uplink, so
   * that a refusal that lasts (a full buffer, a clock not set) does not reconnect every second.
   */
  private attempt = 0;
  /** Whether the current connection reached CONNACK, and whether it was dropped for a refusal. */
  private connected = false;
  private refused = false;

  constructor(
    private readonly deps: CollectorDeps & {
      config: ChirpstackConfig;
      gatewayId: string;
      random?: () => number;
    },
  ) {}

  private options(clientId: string, clean: boolean): IClientOptions {
    const c = this.deps.config;
    return {
      clientId,
      clean,
      protocolVersion: 4,
      // 0: mqtt.js never reconnects by itself; `scheduleReconnect` does, with backoff.
      reconnectPeriod: 0,
      connectTimeout: 10_000,
      ...(c.username ? { username: c.username, password: c.password } : {}),
      ...(c.ca_file ? { ca: fs.readFileSync(c.ca_file) } : {}),
    };
  }

  private get topic(): string {
    return `application/${this.deps.config.application_id}/device/+/event/up`;
  }

  async start(_signal: AbortSignal): Promise<void> {
    if (this.client) return;
    const { config, log, counters } = this.deps;
    const client = connect(
      config.url,
      this.options(config.client_id ?? `${this.deps.gatewayId}-chirpstack`, false),
    );
    client.handleMessage = (packet, callback) => {
      this.onUplink(packet.topic, Buffer.from(packet.payload)).then(
        () => {
          this.attempt = 0;
          callback();
        },
        (err: unknown) => {
          this.refused = true;
          callback(err instanceof Error ? err : new Error(String(err)));
          // No PUBACK: an MQTT 3.1.1 broker sends an unacknowledged message again only on a new
          // connection, and stops sending at all once its in-flight window is full of them. The
          // connection is dropped so that the reconnect (after the backoff) brings it back.
          if (this.client === client) client.stream.destroy();
        },
      );
    };
    client.on('connect', (connack) => {
      this.connected = true;
      this.refused = false;
      counters.state = 'connected';
      log.info(
        { url: config.url, sessionPresent: connack.sessionPresent },
        'connected to the ChirpStack broker',
      );
      client.subscribe(this.topic, { qos: 1 }, (err) => {
        if (err) log.error({ err: err.message, topic: this.topic }, 'subscribe failed');
      });
    });
    client.on('close', () => {
      if (this.client !== client) return;
      if (counters.state === 'connected')
        log.warn({ url: config.url }, 'ChirpStack broker connection lost: reconnecting');
      counters.state = 'reconnecting';
      if (this.connected && !this.refused) this.attempt = 0;
      this.connected = false;
      this.scheduleReconnect(client);
    });
    client.on('error', (err) => {
      counters.errors++;
      log.warn({ err: err.message }, 'ChirpStack broker error');
    });
    this.client = client;
    counters.state = 'connecting';
  }

  /** Plans the next connection attempt of `client` after the backoff of the current attempt. */
  private scheduleReconnect(client: MqttClient): void {
    if (this.reconnectTimer || this.client !== client) return;
    const { config, log } = this.deps;
    const delay = backoffDelay(
      this.attempt,
      config.reconnect_min_ms,
      config.reconnect_max_ms,
      this.deps.random,
    );
    this.attempt++;
    log.debug(
      { url: config.url, retryInMs: delay, attempt: this.attempt },
      'ChirpStack broker: reconnecting after backoff',
    );
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      if (this.client !== client) return;
      // The stores carry over: QoS 1 downlinks not yet acknowledged are sent again.
      client.reconnect({ incomingStore: client.incomingStore, outgoingStore: client.outgoingStore });
    }, delay);
  }

  /** Resolves once the reading is buffered (then mqtt.js sends the PUBACK); rejects to withhold it. */
  private async onUplink(topic: string, payload: Buffer): Promise<void> {
    const { counters, log, sink, config } = this.deps;
    const match = UP_TOPIC.exec(topic);
    if (!match) return;
    counters.received++;
    let event: UplinkEventData;
    try {
      event = parseUplinkEvent(payload, config.encoding);
    } catch (err) {
      if (!(err instanceof UplinkEventError)) throw err;
      counters.invalid++;
      log.info({ topic, reason: err.message }, 'uplink event ignored');
      return;
    }
    this.applications.set(event.devEui, match[1]!);
    const device = config.devices[event.devEui];
    let object = event.object;
    const configured = device?.decoder ?? config.default_decoder;
    const decoder = configured === 'none' ? decoderForModel(device?.model ?? 'lorawan-generic') : configured;
    if (!object) object = decodePayload(decoder, event.data, event.fPort);
    const mapped = object ? measurementsFromObject(object) : { measurements: [], dropped: [], unknown: [] };
    if (mapped.dropped.length > 0)
      log.info(
        { devEui: event.devEui, dropped: mapped.dropped },
        'values outside their sanity range dropped',
      );
    const measurements = [...mapped.measurements];
    if (measurements.length === 0) {
      counters.invalid++;
      log.info(
        { devEui: event.devEui, fCnt: event.fCnt, hasObject: object !== null },
        'uplink without a known measurement',
      );
      return;
    }
    if (event.rssi !== null && event.rssi < 0 && event.rssi >= -150) {
      measurements.push(validateMeasurement({ type: 'signal', value: event.rssi }, 'rssi'));
    }
    try {
      await Promise.all([
        sink.deviceInfo({ device: event.devEui, model: device?.model ?? 'lorawan-generic' }),
        sink.accept({ device: event.devEui, ts: event.time, measurements }),
      ]);
    } catch (err) {
      if (err instanceof ReadingRefused && err.code === 'invalid') {
        counters.invalid++;
        log.info({ devEui: event.devEui, reason: err.message }, 'uplink refused');
        return;
      }
      counters.refused++;
      log.warn(
        { devEui: event.devEui, err: (err as Error).message },
        'uplink not buffered: withholding its PUBACK',
      );
      throw err;
    }
    counters.accepted++;
    log.debug(
      { devEui: event.devEui, fCnt: event.fCnt, measurements: measurements.length },
      'uplink buffered',
    );
  }

  owns(device: string): boolean {
    return this.applications.has(device);
  }

  /** Enqueues the device's configured identify downlink through ChirpStack (`.../command/down`). */
  async identify(device: string): Promise<IdentifyResult> {
    const downlink = this.deps.config.devices[device]?.identify;
    if (!downlink) return 'unsupported';
    const application = this.applications.get(device);
    const client = this.client;
    if (!application || !client?.connected) return 'unreachable';
    const payload = JSON.stringify({
      devEui: device,
      confirmed: false,
      fPort: downlink.f_port,
      data: Buffer.from(downlink.data_hex, 'hex').toString('base64'),
    });
    try {
      await client.publishAsync(`application/${application}/device/${device}/command/down`, payload, {
        qos: 1,
      });
      return 'sent';
    } catch (err) {
      this.deps.log.warn({ device, err: (err as Error).message }, 'identify downlink not enqueued');
      return 'unreachable';
    }
  }

  async check(signal: AbortSignal): Promise<CheckResult> {
    const { config } = this.deps;
    const details = [
      `ChirpStack broker ${config.url}, subscription ${this.topic}, encoding ${config.encoding}`,
    ];
    const client = connect(config.url, {
      ...this.options(`${this.deps.gatewayId}-check-${process.pid}`, true),
      reconnectPeriod: 0,
    });
    try {
      const ok = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => {
          details.push('no CONNACK within 10 s');
          resolve(false);
        }, 10_000);
        signal.addEventListener('abort', () => resolve(false), { once: true });
        client.once('error', (err) => {
          clearTimeout(timer);
          details.push(`cannot connect: ${err.message}`);
          resolve(false);
        });
        client.once('connect', () => {
          client.subscribe(this.topic, { qos: 1 }, (err) => {
            clearTimeout(timer);
            details.push(err ? `subscribe refused: ${err.message}` : 'connected and subscribed');
            resolve(!err);
          });
        });
      });
      return { ok, details };
    } finally {
      await endWithin(client, 2000);
    }
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = null;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
    if (!client) return;
    this.deps.counters.state = 'stopped';
    await endWithin(client, 2000);
  }
}
