import { EventEmitter } from 'node:events';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import { Aedes, type Client, type PublishPacket } from 'aedes';
import mqttPacket from 'mqtt-packet';
import type { TestPki } from './pki.ts';

export interface BridgeMessage {
  topic: string;
  /** The payload parsed as JSON. */
  body: any;
  retain: boolean;
  qos: number;
  /** The publishing client's certificate CN. */
  cn: string;
}

export interface LocalBridgeOptions {
  /** Listen on this port (to come back on the same address after a stop); 0 picks one. */
  port?: number;
  /** Answers a publish with this PUBACK reason code instead of accepting it (null accepts). */
  refuse?: (topic: string, body: any) => { code: number; reason: string } | null;
}

/**
 * A stand-in for the cloud's MQTT bridge that follows its contract (docs/api/mqtt.md;
 * reference/aedes-mqtt5.md): aedes on a TLS server requiring a client certificate of the test CA,
 * MQTT 5 only, publishes confined to `service/<CN>/`, PUBACK only after the message is recorded.
 * It records what arrives, in order, and can refuse a message with a chosen reason code.
 */
export class LocalBridge extends EventEmitter<{ message: [BridgeMessage] }> {
  readonly messages: BridgeMessage[] = [];
  /** Every CONNECT the bridge saw, with the protocol version and the will topic. */
  readonly connects: { clientId: string; version: number; willTopic: string | null }[] = [];
  private server: tls.Server | null = null;
  private broker: Aedes | null = null;
  private readonly sockets = new Set<tls.TLSSocket>();

  constructor(
    private readonly pki: TestPki,
    private readonly options: LocalBridgeOptions = {},
  ) {
    super();
  }

  port = 0;

  get url(): string {
    return `mqtts://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const cns = new WeakMap<Client, string>();
    const broker = await Aedes.createBroker({
      preConnect: (client, packet, cb) => {
        const cn = (client.conn as tls.TLSSocket).getPeerCertificate()?.subject?.CN;
        cns.set(client, String(cn ?? ''));
        this.connects.push({
          clientId: packet.clientId,
          version: packet.protocolVersion ?? 0,
          willTopic: packet.will?.topic ?? null,
        });
        if (packet.protocolVersion !== 5) (packet as { protocolVersion: number }).protocolVersion = 0;
        cb(null, true);
      },
      authorizePublish: (client, packet, cb) => {
        if (packet.properties) delete (packet.properties as Record<string, unknown>).willDelayInterval;
        const cn = client ? (cns.get(client) ?? '') : '';
        if (client && !packet.topic.startsWith(`service/${cn}/`)) return cb(new Error('outside namespace'));
        let body: any;
        try {
          body = JSON.parse(packet.payload.toString());
        } catch {
          body = packet.payload.toString();
        }
        const refusal = client ? this.options.refuse?.(packet.topic, body) : null;
        if (client && refusal) {
          // The PUBACK reason-code technique of reference/aedes-mqtt5.md §3(d), as the cloud uses it.
          mqttPacket.writeToStream(
            {
              cmd: 'puback',
              messageId: packet.messageId,
              reasonCode: refusal.code,
              properties: { reasonString: refusal.reason },
            },
            client.conn,
            { protocolVersion: 5 },
          );
          (packet as PublishPacket & { _notAuthorized?: boolean })._notAuthorized = true;
          return cb(null);
        }
        if (client) {
          const message = { topic: packet.topic, body, retain: packet.retain, qos: packet.qos, cn };
          this.messages.push(message);
          this.emit('message', message);
        }
        cb(null);
      },
      authorizeSubscribe: (client, sub, cb) => {
        cb(null, sub.topic.startsWith(`service/${cns.get(client)}/`) ? sub : null);
      },
    });
    const server = tls.createServer(
      {
        requestCert: true,
        rejectUnauthorized: true,
        ca: this.pki.caPem,
        key: this.pki.serverKeyPem,
        cert: this.pki.serverCertPem,
        minVersion: 'TLSv1.2',
      },
      (socket) => {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        broker.handle(socket);
      },
    );
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.options.port ?? this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    this.broker = broker;
  }

  /** A downlink the cloud would send (e.g. `cmd/identify`). */
  publish(topic: string, payload: string): Promise<void> {
    return new Promise((resolve, reject) =>
      this.broker!.publish(
        { cmd: 'publish', topic, payload: Buffer.from(payload), qos: 1, retain: false, dup: false },
        (err) => (err ? reject(err) : resolve()),
      ),
    );
  }

  /** Measurement messages (not lwt/info), in arrival order. */
  readings(): BridgeMessage[] {
    return this.messages.filter((m) => m.topic.split('/').length === 3);
  }

  /** Resolves once `predicate` holds over the recorded messages. */
  waitFor(
    predicate: (messages: BridgeMessage[]) => boolean,
    what = 'messages',
    timeoutMs = 20_000,
  ): Promise<void> {
    if (predicate(this.messages)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.off('message', check);
        reject(new Error(`timed out waiting for ${what}; got ${this.messages.length} messages`));
      }, timeoutMs);
      const check = () => {
        if (!predicate(this.messages)) return;
        clearTimeout(timer);
        this.off('message', check);
        resolve();
      };
      this.on('message', check);
    });
  }

  /** Closes the broker and the listener, cutting every client off (as an outage would). Safe twice. */
  async stop(): Promise<void> {
    const { server, broker } = this;
    this.server = null;
    this.broker = null;
    // Stop accepting first, so a client reconnecting at once does not slip in behind the close.
    const closed = server ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve();
    if (broker) await new Promise<void>((resolve) => broker.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }
}
