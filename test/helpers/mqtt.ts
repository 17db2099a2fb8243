import tls from 'node:tls';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import mqttPacket from 'mqtt-packet';
import type { TestCloud } from './cloud.ts';

/** MQTT bridge helpers for tests: a bridge made through the API, mqtt.js clients over real mutual TLS. */

export interface BridgeBundle {
  id: string;
  site_id: string;
  name: string;
  topic_root: string;
  mqtt_url: string;
  cert_serial: string;
  cert_fingerprint: string;
  expires_at: string;
  cert_pem: string;
  key_pem: string;
  ca_pem: string;
}

export async function createBridge(
  t: TestCloud,
  token: string,
  siteId: string,
  name = 'Site broker',
): Promise<BridgeBundle> {
  const answer = await t.http.post('/v1/bridges', { site_id: siteId, name }, { token });
  if (answer.status !== 201) throw new Error(`POST /v1/bridges: ${answer.status} ${answer.text}`);
  return answer.json;
}

/** A cloud in this process, or the `mqtts://` URL of one elsewhere (a spawned replica, a balancer). */
export type MqttTarget = TestCloud | string;

export function mqttUrl(t: MqttTarget): string {
  return typeof t === 'string' ? t : `mqtts://127.0.0.1:${t.cloud.mqttPort}`;
}

/** Connects with the bundle's certificate (MQTT 5 unless told otherwise); rejects when refused. */
export async function connectBridge(
  t: MqttTarget,
  bundle: Pick<BridgeBundle, 'cert_pem' | 'key_pem' | 'ca_pem'> | null,
  options: IClientOptions = {},
): Promise<MqttClient> {
  return mqtt.connectAsync(mqttUrl(t), {
    protocolVersion: 5,
    reconnectPeriod: 0,
    connectTimeout: 10_000,
    ...(bundle ? { cert: bundle.cert_pem, key: bundle.key_pem, ca: bundle.ca_pem } : {}),
    ...options,
  });
}

export interface PublishResult {
  reasonCode: number;
  reasonString: string | undefined;
}

/** Publishes and answers the PUBACK's (or PUBREC's) reason code; 0 for success. */
export function publish(
  client: MqttClient,
  topic: string,
  payload: unknown,
  options: { qos?: 0 | 1 | 2; retain?: boolean } = {},
): Promise<PublishResult> {
  const body = typeof payload === 'string' || Buffer.isBuffer(payload) ? payload : JSON.stringify(payload);
  return new Promise((resolve, reject) => {
    client.publish(topic, body, { qos: options.qos ?? 1, retain: options.retain ?? false }, (err, packet) => {
      const ack = packet as { reasonCode?: number; properties?: { reasonString?: string } } | undefined;
      if (err) {
        const code = (err as { code?: unknown }).code;
        if (typeof code === 'number') {
          resolve({ reasonCode: code, reasonString: ack?.properties?.reasonString });
          return;
        }
        reject(err);
        return;
      }
      resolve({ reasonCode: ack?.reasonCode ?? 0, reasonString: ack?.properties?.reasonString });
    });
  });
}

/** Resolves with the next message on a topic matching `filter` (exact topic or `#` suffix). */
export function nextMessage(
  client: MqttClient,
  predicate: (topic: string) => boolean,
): Promise<{ topic: string; payload: Buffer; packet: mqtt.IPublishPacket }> {
  return new Promise((resolve) => {
    const onMessage = (topic: string, payload: Buffer, packet: mqtt.IPublishPacket) => {
      if (!predicate(topic)) return;
      client.off('message', onMessage);
      resolve({ topic, payload, packet });
    };
    client.on('message', onMessage);
  });
}

export async function closeClient(client: MqttClient | undefined): Promise<void> {
  if (client && !client.disconnected) await client.endAsync(true);
}

/**
 * Connects and says how it ended: `connected`, or refused with the CONNACK reason code, a TLS error,
 * or a closed socket. Some refusals only close the socket (TLS 1.3 reports a bad client certificate
 * after the client thinks the handshake is over), which `connectAsync` never reports.
 */
export function tryConnect(
  t: MqttTarget,
  bundle: Pick<BridgeBundle, 'cert_pem' | 'key_pem' | 'ca_pem'> | null,
  options: IClientOptions = {},
): Promise<{ outcome: 'connected' | 'refused' | 'error' | 'closed'; code?: number; message?: string }> {
  const client = mqtt.connect(mqttUrl(t), {
    protocolVersion: 5,
    reconnectPeriod: 0,
    connectTimeout: 10_000,
    ...(bundle ? { cert: bundle.cert_pem, key: bundle.key_pem, ca: bundle.ca_pem } : {}),
    ...options,
  });
  return new Promise((resolve) => {
    const done = (result: {
      outcome: 'connected' | 'refused' | 'error' | 'closed';
      code?: number;
      message?: string;
    }) => {
      client.removeAllListeners();
      client.on('error', () => undefined);
      client.end(true);
      resolve(result);
    };
    client.once('connect', () => done({ outcome: 'connected' }));
    client.once('error', (err) => {
      const code = (err as { code?: unknown }).code;
      done(
        typeof code === 'number'
          ? { outcome: 'refused', code, message: err.message }
          : { outcome: 'error', message: err.message },
      );
    });
    client.once('close', () => done({ outcome: 'closed' }));
  });
}

/** Subscribes and answers the SUBACK's per-filter reason codes (mqtt.js only reports the first failure). */
export function subscribeCodes(client: MqttClient, filters: string[]): Promise<number[]> {
  return new Promise((resolve) => {
    const onPacket = (packet: mqtt.Packet) => {
      if (packet.cmd !== 'suback') return;
      client.off('packetreceive', onPacket);
      resolve(packet.granted.map((g) => (typeof g === 'number' ? g : (g as { qos: number }).qos)));
    };
    client.on('packetreceive', onPacket);
    client.subscribe(Object.fromEntries(filters.map((f) => [f, { qos: 1 as const }])), () => undefined);
  });
}

/**
 * An MQTT 5 client made of a TLS socket and mqtt-packet, for what mqtt.js decides by itself: which
 * packets share one write (and so one read on the server), packet ids, DUP, dropping the connection
 * at a chosen moment.
 */
export interface RawClient {
  socket: tls.TLSSocket;
  /** Writes the packets in one write. */
  send(...packets: mqttPacket.Packet[]): void;
  /** The next received packet of this kind, in the order they came (waits for it). */
  next(cmd: mqttPacket.Packet['cmd']): Promise<mqttPacket.Packet>;
  /** Packets received and not yet taken by `next`. */
  unread: mqttPacket.Packet[];
}

/** Connects (CONNECT with `connect`'s fields) and resolves once the CONNACK is back. */
export async function rawConnect(
  t: TestCloud,
  bundle: Pick<BridgeBundle, 'cert_pem' | 'key_pem' | 'ca_pem'>,
  connect: Partial<mqttPacket.IConnectPacket> = {},
): Promise<RawClient & { connack: mqttPacket.IConnackPacket }> {
  const socket = tls.connect({
    host: '127.0.0.1',
    port: t.cloud.mqttPort,
    cert: bundle.cert_pem,
    key: bundle.key_pem,
    ca: bundle.ca_pem,
  });
  const parser = mqttPacket.parser({ protocolVersion: 5 });
  const packets: mqttPacket.Packet[] = [];
  const waiters: (() => void)[] = [];
  parser.on('packet', (p) => {
    packets.push(p);
    waiters.splice(0).forEach((w) => w());
  });
  socket.on('data', (d: Buffer) => parser.parse(d));
  socket.on('error', () => undefined); // a test that drops the connection sees it in its assertions
  const client: RawClient = {
    socket,
    unread: packets,
    send: (...list) =>
      socket.write(Buffer.concat(list.map((p) => mqttPacket.generate(p, { protocolVersion: 5 })))),
    next: async (cmd) => {
      for (;;) {
        const i = packets.findIndex((p) => p.cmd === cmd);
        if (i >= 0) return packets.splice(i, 1)[0]!;
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
  };
  await new Promise((resolve) => socket.once('secureConnect', resolve));
  client.send({
    cmd: 'connect',
    protocolVersion: 5,
    protocolId: 'MQTT',
    clientId: 'raw',
    clean: true,
    keepalive: 30,
    ...connect,
  });
  return { ...client, connack: (await client.next('connack')) as mqttPacket.IConnackPacket };
}
