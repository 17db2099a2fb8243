import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Aedes, type AedesOptions, type Client, type PublishPacket } from 'aedes';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import mqttPacket from 'mqtt-packet';
import { eventually } from '../../helpers/eventually.ts';
import {
  answerPublish,
  capQos,
  isMosquittoBridgeNotification,
  isQos2Retransmission,
  isWill,
  keepResumableSession,
  peerOf,
  refuseUnlessMqtt5,
  releaseForLaterAnswer,
  rememberPeer,
  stripWillDelay,
} from '../../../cloud/src/mqtt/aedes-compat.ts';
import {
  CertificateAuthority,
  createCertificateAuthority,
  type IssuedCertificate,
} from '../../../cloud/src/pki/certificates.ts';

/**
 * Each aedes 2.0.0-beta.1 workaround of `aedes-compat.ts`, pinned on a bare aedes over mutual TLS,
 * so that a new aedes release shows at once which of them still hold.
 */
let ca: CertificateAuthority;
let server: IssuedCertificate;
let client: IssuedCertificate;

beforeAll(async () => {
  const now = new Date();
  ca = await CertificateAuthority.load(
    await createCertificateAuthority({ commonName: 'Test CA', now, days: 2 }),
  );
  server = await ca.issueServer({ hosts: ['127.0.0.1'], now, days: 2 });
  client = await ca.issueClient({ accountId: 'acc_T', bridgeId: 'brg_T', now, days: 2 });
});

interface Harness {
  port: number;
  broker: Aedes;
  publishes: { packet: PublishPacket; cn: string | undefined; retransmission: boolean }[];
  connected: Client[];
  close(): Promise<void>;
}

let harness: Harness | null = null;
const clients: MqttClient[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) await c.endAsync(true);
  await harness?.close();
  harness = null;
});

/**
 * A bare broker whose hooks use the workarounds; `reject` picks publishes to answer 0x99.
 * `authorizePublish` replaces the publish hook.
 */
async function startBroker(
  reject: (topic: string) => boolean = () => false,
  authorizePublish?: AedesOptions['authorizePublish'],
): Promise<Harness> {
  const publishes: Harness['publishes'] = [];
  const connected: Client[] = [];
  const broker = await Aedes.createBroker({
    preConnect: (c, packet, cb) => {
      rememberPeer(c);
      if (!refuseUnlessMqtt5(packet)) keepResumableSession(packet, 3600);
      cb(null, true);
    },
    authorizePublish:
      authorizePublish ??
      ((c, packet, cb) => {
        stripWillDelay(packet);
        void (async () => {
          const retransmission = c && !isWill(packet) ? await isQos2Retransmission(c, packet) : false;
          publishes.push({ packet, cn: peerOf(c)?.commonName, retransmission });
          if (c && reject(packet.topic)) answerPublish(c, packet, 0x99, 'bad_json: no');
          cb(null);
        })();
      }),
    authorizeForward: (_c, packet) => capQos(packet),
  });
  broker.on('client', (c) => connected.push(c));
  const tlsServer = tls.createServer(
    {
      requestCert: true,
      rejectUnauthorized: true,
      ca: [ca.certPem],
      cert: server.certPem,
      key: server.keyPem,
    },
    (socket) => broker.handle(socket),
  );
  await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
  harness = {
    port: (tlsServer.address() as AddressInfo).port,
    broker,
    publishes,
    connected,
    close: async () => {
      await new Promise<void>((resolve) => broker.close(() => resolve()));
      await new Promise((resolve) => tlsServer.close(resolve));
    },
  };
  return harness;
}

async function connect(h: Harness, options: IClientOptions = {}): Promise<MqttClient> {
  const c = await mqtt.connectAsync(`mqtts://127.0.0.1:${h.port}`, {
    protocolVersion: 5,
    reconnectPeriod: 0,
    cert: client.certPem,
    key: client.keyPem,
    ca: ca.certPem,
    ...options,
  });
  clients.push(c);
  return c;
}

describe('aedes 2.0.0-beta.1 workarounds', () => {
  it('refuseUnlessMqtt5: a 3.1.1 CONNECT gets CONNACK 1 "unacceptable protocol version", MQTT 5 connects', async () => {
    const h = await startBroker();
    await expect(connect(h, { protocolVersion: 4 })).rejects.toMatchObject({ code: 1 });
    await expect(connect(h)).resolves.toBeDefined();
  });

  it('keepResumableSession: Clean Start 0 without Session Expiry gets an hour; explicit values are kept', async () => {
    const h = await startBroker();
    await connect(h, { clean: false, clientId: 'bridge-a' });
    await connect(h, { clean: false, clientId: 'bridge-b', properties: { sessionExpiryInterval: 10 } });
    await connect(h, { clean: true, clientId: 'plain' });
    const byId = Object.fromEntries(h.connected.map((c) => [c.id, c.sessionExpiryInterval]));
    expect(byId).toEqual({ 'bridge-a': 3600, 'bridge-b': 10, plain: 0 });
  });

  it('rememberPeer, stripWillDelay, isWill: a will authorised after its socket is gone still has the CN, and is forwarded without Will Delay Interval', async () => {
    const h = await startBroker();
    const listener = await connect(h);
    await listener.subscribeAsync('wills/#', { qos: 1 });
    const dying = await connect(h, {
      will: {
        topic: 'wills/x',
        payload: Buffer.from('gone'),
        qos: 1,
        retain: false,
        properties: { willDelayInterval: 1 },
      },
      properties: { sessionExpiryInterval: 0 },
    });
    const received = new Promise<mqtt.IPublishPacket>((resolve) =>
      listener.once('message', (_t, _p, packet) => resolve(packet)),
    );
    dying.stream.destroy();
    const packet = await received;
    expect(packet.properties ?? {}).not.toHaveProperty('willDelayInterval');
    const will = h.publishes.find((p) => p.packet.topic === 'wills/x')!;
    expect(isWill(will.packet)).toBe(true);
    expect(will.cn).toBe('acc_T');
  });

  it('answerPublish: any reason code with its reason string reaches the client, and aedes neither acks again nor routes it', async () => {
    const h = await startBroker((topic) => topic === 'x/bad');
    const listener = await connect(h);
    await listener.subscribeAsync('x/#', { qos: 1 });
    const seen: string[] = [];
    listener.on('message', (topic) => seen.push(topic));
    const c = await connect(h);
    const answer = await new Promise<{ code: unknown; reason: unknown }>((resolve) =>
      c.publish('x/bad', 'payload', { qos: 1 }, (err, packet) =>
        resolve({
          code: (err as { code?: unknown }).code,
          reason: (packet as { properties?: { reasonString?: string } }).properties?.reasonString,
        }),
      ),
    );
    expect(answer).toEqual({ code: 0x99, reason: 'bad_json: no' });
    const good = new Promise((resolve) => listener.once('message', resolve));
    await c.publishAsync('x/good', 'payload', { qos: 1 });
    await good;
    expect(seen).toEqual(['x/good']);
  });

  it('isQos2Retransmission: a QoS 2 PUBLISH sent again with DUP before PUBREL is recognised; the same id with another payload or without DUP is a new message', async () => {
    const h = await startBroker();
    const socket = tls.connect({
      host: '127.0.0.1',
      port: h.port,
      cert: client.certPem,
      key: client.keyPem,
      ca: ca.certPem,
    });
    const parser = mqttPacket.parser({ protocolVersion: 5 });
    const got: string[] = [];
    let wake: (() => void) | null = null;
    parser.on('packet', (p) => {
      got.push(p.cmd);
      wake?.();
    });
    socket.on('data', (d) => parser.parse(d));
    const waitFor = async (count: number) => {
      while (got.length < count) await new Promise<void>((resolve) => (wake = resolve));
    };
    const send = (p: mqttPacket.Packet) => mqttPacket.writeToStream(p, socket, { protocolVersion: 5 });
    await new Promise((resolve) => socket.once('secureConnect', resolve));
    send({
      cmd: 'connect',
      protocolVersion: 5,
      protocolId: 'MQTT',
      clientId: 'raw',
      clean: true,
      keepalive: 30,
    });
    await waitFor(1);
    const publish = {
      cmd: 'publish' as const,
      topic: 'q/2',
      payload: Buffer.from('x'),
      qos: 2 as const,
      messageId: 3,
      dup: false,
      retain: false,
    };
    send(publish);
    await waitFor(2);
    send({ ...publish, dup: true });
    await waitFor(3);
    send({ ...publish, dup: true, payload: Buffer.from('y') });
    await waitFor(4);
    send({ ...publish, payload: Buffer.from('y') });
    await waitFor(5);
    send({ cmd: 'pubrel', messageId: 3 });
    await waitFor(6);
    socket.destroy();
    expect(got).toEqual(['connack', 'pubrec', 'pubrec', 'pubrec', 'pubrec', 'pubcomp']);
    expect(h.publishes.map((p) => p.retransmission)).toEqual([false, true, false, false]);
  });

  it('capQos: a QoS 2 message reaches a QoS 1 wildcard subscriber at QoS 1', async () => {
    const h = await startBroker();
    const listener = await connect(h);
    await listener.subscribeAsync('w/#', { qos: 1 });
    const received = new Promise<mqtt.IPublishPacket>((resolve) =>
      listener.once('message', (_t, _p, packet) => resolve(packet)),
    );
    await (await connect(h)).publishAsync('w/x', 'payload', { qos: 2 });
    expect((await received).qos).toBe(1);
  });

  it('releaseForLaterAnswer: aedes hands over the next PUBLISH while a released one waits for its answer, which is its only PUBACK, and does not route it', async () => {
    const waiting: { topic: string; answer: () => void }[] = [];
    const h = await startBroker(undefined, (c, packet, cb) => {
      releaseForLaterAnswer(packet, cb);
      waiting.push({ topic: packet.topic, answer: () => answerPublish(c!, packet, 0, null) });
    });
    const listener = await connect(h);
    await listener.subscribeAsync('released/#', { qos: 1 });
    const routed: string[] = [];
    listener.on('message', (topic) => routed.push(topic));
    const c = await connect(h);
    const pubacks: number[] = [];
    c.on('packetreceive', (p) => {
      if (p.cmd === 'puback') pubacks.push(p.messageId!);
    });
    const arrived = (n: number) => eventually(() => waiting.length >= n, `${n} publishes at the hook`);

    const first = c.publishAsync('released/1', 'x', { qos: 1 });
    await arrived(1);
    const second = c.publishAsync('released/2', 'x', { qos: 1 });
    await arrived(2); // the first is still unanswered
    for (const w of waiting.splice(0)) w.answer();
    await Promise.all([first, second]);
    // A third round trip: any second PUBACK or routed copy of the first two would have come before it.
    const third = c.publishAsync('released/3', 'x', { qos: 1 });
    await arrived(1);
    waiting[0]!.answer();
    await third;
    expect(pubacks).toHaveLength(3);
    expect(routed).toEqual([]);
  });

  it("isMosquittoBridgeNotification: only Mosquitto's connection state topic", () => {
    expect(isMosquittoBridgeNotification('$SYS/broker/connection/cloud/state')).toBe(true);
    expect(isMosquittoBridgeNotification('$SYS/broker/connection/a/b/state')).toBe(false);
    expect(isMosquittoBridgeNotification('service/acc/x')).toBe(false);
  });
});
