import tls from 'node:tls';
import fc from 'fast-check';
import mqttPacket from 'mqtt-packet';
import { row, type Tally } from './http-fuzz.ts';
import type { FuzzWorld } from './world.ts';

/**
 * Malformed MQTT on the bridge, over mutual TLS with the bridge's own certificate (the packets reach
 * the broker's parser and the bridge's handlers): random bytes before any CONNECT, mutated CONNECTs,
 * and after a valid CONNECT a stream of packets that are valid, mutated (bytes flipped, truncated,
 * reserved packet types, lying remaining lengths) or carry random topics and payloads. Each
 * connection is a row entry: `2xx` when the server answered, `closed` when it hung up, which is the
 * protocol's answer to a malformed packet.
 */

const generate = (p: mqttPacket.Packet) => mqttPacket.generate(p, { protocolVersion: 5 });

function connectPacket(clientId: string): mqttPacket.IConnectPacket {
  return { cmd: 'connect', protocolVersion: 5, protocolId: 'MQTT', clientId, clean: true, keepalive: 30 };
}

function packetOf(root: string): fc.Arbitrary<Buffer> {
  const topic = fc.oneof(
    fc.string({ maxLength: 40 }).map((s) => `${root}/${s}`),
    fc.constantFrom(
      `${root}/fridge-1`,
      `${root}/`,
      `${root}/a/b`,
      `${root}/#`,
      `${root}/+`,
      'service/other/x',
      '$SYS/x',
      '/',
    ),
    fc.string({ minLength: 1, maxLength: 80 }),
  );
  const payload = fc.oneof(
    fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
    fc.jsonValue({ maxDepth: 3 }).map((v) => Buffer.from(JSON.stringify(v) ?? 'null')),
    fc
      .record({
        ts: fc.oneof(
          fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
          fc.string({ maxLength: 30 }),
        ),
        measurements: fc.array(
          fc.record({
            type: fc.constantFrom('temperature', 'humidity', 'leak', 'door', 'x', ''),
            value: fc.oneof(fc.double(), fc.integer(), fc.string({ maxLength: 5 }), fc.constant(null)),
          }),
          { maxLength: 5 },
        ),
      })
      .map((v) => Buffer.from(JSON.stringify(v))),
    fc.constantFrom(
      Buffer.alloc(70_000, 0x7b),
      Buffer.from('{"measurements":' + '['.repeat(5000)),
      Buffer.from([0xff, 0xfe, 0]),
    ),
  );
  const packet: fc.Arbitrary<mqttPacket.Packet> = fc.oneof(
    {
      weight: 5,
      arbitrary: fc
        .record({
          topic,
          payload,
          qos: fc.constantFrom(0, 1, 1, 2),
          retain: fc.boolean(),
          dup: fc.boolean(),
          messageId: fc.integer({ min: 1, max: 65535 }),
        })
        .map((p) => ({ cmd: 'publish' as const, ...p, qos: p.qos })),
    },
    fc
      .record({
        topic: fc.string({ minLength: 1, maxLength: 40 }),
        messageId: fc.integer({ min: 1, max: 65535 }),
      })
      .map(({ topic, messageId }) => ({
        cmd: 'subscribe' as const,
        messageId,
        subscriptions: [{ topic, qos: 1 as const }],
      })),
    fc
      .record({
        topic: fc.oneof(
          fc.string({ minLength: 1, maxLength: 40 }),
          fc.constantFrom('constructor', 'toString', '__proto__', 'hasOwnProperty', `${root}/x`, '#'),
        ),
        messageId: fc.integer({ min: 1, max: 65535 }),
      })
      .map(({ topic, messageId }) => ({ cmd: 'unsubscribe' as const, messageId, unsubscriptions: [topic] })),
    fc.integer({ min: 1, max: 65535 }).map((messageId) => ({ cmd: 'puback' as const, messageId })),
    fc.integer({ min: 1, max: 65535 }).map((messageId) => ({ cmd: 'pubrel' as const, messageId })),
    fc.integer({ min: 1, max: 65535 }).map((messageId) => ({ cmd: 'pubrec' as const, messageId })),
    fc.constant({ cmd: 'pingreq' as const }),
    fc.constant(connectPacket('again')),
    fc.constant({ cmd: 'auth' as const, reasonCode: 0x18 }),
  );
  const mutated = fc
    .tuple(
      packet.map((p) => {
        try {
          return generate(p);
        } catch {
          return Buffer.from([0xc0, 0]);
        }
      }),
      fc.array(fc.tuple(fc.nat(), fc.nat(255)), { maxLength: 4 }),
      fc.nat(100),
    )
    .map(([bytes, flips, cut]) => {
      const b = Buffer.from(bytes);
      for (const [at, v] of flips) if (b.length) b[at % b.length] = v;
      return cut < 10 ? b.subarray(0, Math.max(1, b.length - cut)) : b;
    });
  return fc.oneof(
    {
      weight: 4,
      arbitrary: packet.map((p) => {
        try {
          return generate(p);
        } catch {
          return Buffer.from([0xe0, 0]);
        }
      }),
    },
    { weight: 3, arbitrary: mutated },
    fc.constantFrom(
      Buffer.from([0x00, 0x00]),
      Buffer.from([0xf0, 0x00]),
      Buffer.from([0x30, 0xff, 0xff, 0xff, 0xff]),
      Buffer.from([0x32, 0xff, 0xff, 0xff, 0x7f]),
      Buffer.from([0x36, 0x04, 0x00, 0x01, 0x61, 0x00]),
      Buffer.from([0x82, 0x02, 0x00, 0x01]),
    ),
    fc.uint8Array({ minLength: 1, maxLength: 100 }).map((b) => Buffer.from(b)),
  );
}

interface Session {
  connect: 'valid' | 'mutated' | 'none';
  packets: Buffer[];
}

function sessionOf(root: string): fc.Arbitrary<Session> {
  return fc.record({
    connect: fc.constantFrom<Session['connect']>('valid', 'valid', 'valid', 'mutated', 'none'),
    packets: fc.array(packetOf(root), { minLength: 1, maxLength: 12 }),
  });
}

/** Runs one session; resolves with whether the server answered anything and whether it hung up. */
function runSession(
  world: FuzzWorld,
  session: Session,
  id: number,
): Promise<{ answered: boolean; closed: boolean }> {
  const { bridge } = world;
  return new Promise((resolve) => {
    const socket = tls.connect({
      host: '127.0.0.1',
      port: world.t.cloud.mqttPort,
      cert: bridge.cert_pem,
      key: bridge.key_pem,
      ca: bridge.ca_pem,
    });
    let answered = false;
    let closed = false;
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ answered, closed });
    };
    const timer = setTimeout(finish, 400);
    socket.on('data', () => (answered = true));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed = true;
      finish();
    });
    socket.once('secureConnect', () => {
      const first =
        session.connect === 'none'
          ? []
          : session.connect === 'valid'
            ? [generate(connectPacket(`fuzz-${id}`))]
            : [mutate(generate(connectPacket(`fuzz-${id}`)), id)];
      // Packets go one write each after the CONNECT, so the broker sees them as a client sends them.
      socket.write(Buffer.concat(first));
      for (const p of session.packets) socket.write(p);
    });
  });
}

function mutate(b: Buffer, id: number): Buffer {
  const out = Buffer.from(b);
  out[(id * 7) % out.length] = (id * 31) & 0xff;
  return id % 3 === 0 ? out.subarray(0, Math.max(2, out.length - (id % 7))) : out;
}

/** Runs `sessions` sessions, `concurrency` at a time, tallied under the `mqtt` family. */
export async function fuzzMqtt(
  world: FuzzWorld,
  tally: Tally,
  options: { sessions: number; seed: number; concurrency?: number },
): Promise<number> {
  const sessions = fc.sample(sessionOf(world.topicRoot), { numRuns: options.sessions, seed: options.seed });
  const r = row(tally, 'mqtt (sessions)');
  let packets = 0;
  let next = 0;
  const worker = async () => {
    while (next < sessions.length) {
      const i = next++;
      const s = sessions[i]!;
      packets += s.packets.length + (s.connect === 'none' ? 0 : 1);
      const outcome = await runSession(world, s, i);
      r.requests++;
      if (outcome.answered) r.s2xx++;
      if (outcome.closed) r.closed++;
    }
  };
  await Promise.all(Array.from({ length: options.concurrency ?? 4 }, worker));
  return packets;
}
