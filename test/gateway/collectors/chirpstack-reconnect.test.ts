import { afterEach, describe, expect, it } from '@jest/globals';
import { Aedes } from 'aedes';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { chirpstackUpJson } from '../../../hardware/emulators/lorawan-webhook.ts';
import { ChirpstackCollector } from '../../../gateway/src/collectors/chirpstack/chirpstack.collector.ts';
import { systemClock } from '../../../gateway/src/clock.ts';
import { createLogger } from '../../../gateway/src/logger.ts';
import { ReadingRefused, type Reading, type ReadingSink } from '../../../gateway/src/reading.ts';
import { GatewayStatus } from '../../../gateway/src/status.ts';
import { noMemory, until } from '../helpers/gateway.ts';

/**
 * The ChirpStack subscriber's reconnects against a real TCP listener: a broker that hangs up on the
 * first connections sees the gateway come back after growing waits (not at a fixed period), and a
 * connection that succeeded resets the wait to the minimum.
 */
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/**
 * An aedes broker on 127.0.0.1, port 0, closed after the test. `hangUp` answers, per connection
 * in order, whether to hang up at once (a broker refusing connections). Answers the broker, its port
 * and the arrival time of every connection.
 */
async function startBroker(hangUp: () => boolean = () => false) {
  const broker = await Aedes.createBroker();
  const arrivals: number[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    arrivals.push(performance.now());
    if (hangUp()) {
      socket.destroy();
      return;
    }
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    broker.handle(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  cleanups.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await new Promise<void>((resolve) => broker.close(() => resolve()));
  });
  return { broker, sockets, arrivals, port: (server.address() as AddressInfo).port };
}

/** A started subscriber of application `applicationId` on `port`, with every wait at its ceiling. */
async function startCollector(
  port: number,
  sink: ReadingSink,
  options: { applicationId: string; minMs: number; maxMs: number },
) {
  const counters = new GatewayStatus().collector('chirpstack');
  const collector = new ChirpstackCollector({
    sink,
    clock: systemClock,
    memory: noMemory,
    log: createLogger('error', new Writable({ write: (_c, _e, done) => done() })),
    counters,
    gatewayId: 'gw-test',
    // The top of each jitter range: every wait is exactly its ceiling.
    random: () => 1,
    config: {
      enabled: true,
      url: `mqtt://127.0.0.1:${port}`,
      application_id: options.applicationId,
      encoding: 'auto',
      reconnect_min_ms: options.minMs,
      reconnect_max_ms: options.maxMs,
      devices: {},
      default_decoder: 'none',
    },
  });
  cleanups.push(() => collector.stop());
  await collector.start(new AbortController().signal);
  return counters;
}

const acceptAll: ReadingSink = {
  accept: () => Promise.resolve(),
  deviceInfo: () => Promise.resolve(),
  deviceState: () => Promise.resolve(),
};

describe('ChirpStack subscriber reconnects', () => {
  it('waits an exponential backoff between attempts, reset by a successful connect', async () => {
    let refuse = 4;
    const { sockets, arrivals, port } = await startBroker(() => refuse-- > 0);
    const counters = await startCollector(port, acceptAll, { applicationId: '+', minMs: 100, maxMs: 400 });

    await until(() => counters.state === 'connected', 'the fifth attempt to connect', 10_000);
    expect(arrivals).toHaveLength(5);
    const gaps = arrivals.slice(1).map((t, i) => t - arrivals[i]!);
    // Ceilings 100, 200, 400 (the cap), 400; timers never fire early, so the lower bounds show the
    // growth. A loaded machine (or a stall of this process) may add latency, but nowhere near a
    // fixed 2 s period.
    const expected = [100, 200, 400, 400];
    gaps.forEach((gap, i) => {
      expect(gap).toBeGreaterThanOrEqual(expected[i]! - 5);
      expect(gap).toBeLessThan(expected[i]! + 1500);
    });

    // Connected once: the next loss waits the minimum again, not the capped 400 ms.
    const lost = performance.now();
    for (const s of sockets) s.destroy();
    await until(() => arrivals.length === 6, 'the reconnect after the loss', 10_000);
    expect(arrivals[5]! - lost).toBeGreaterThanOrEqual(95);
    await until(() => counters.state === 'connected', 'connected again', 10_000);
  });

  it('takes an uplink the buffer refused again: the connection is dropped, and the broker sends it anew', async () => {
    // An MQTT 3.1.1 broker sends an unacknowledged message again only on a new connection; kept
    // open without a PUBACK, the uplink would never come back (and a full in-flight window would
    // stop every later one).
    const { broker, arrivals, port } = await startBroker();
    const subscribed = new Promise<void>((resolve) =>
      broker.on('subscribe', (subs) => {
        if (subs.some((s) => s.topic.startsWith('application/'))) resolve();
      }),
    );
    let refusals = 2;
    const accepted: Reading[] = [];
    const counters = await startCollector(
      port,
      {
        ...acceptAll,
        accept: (reading) => {
          if (refusals > 0) {
            refusals--;
            return Promise.reject(new ReadingRefused('buffer_full', 'the buffer holds its capacity'));
          }
          accepted.push(reading);
          return Promise.resolve();
        },
      },
      { applicationId: 'app-1', minMs: 50, maxMs: 200 },
    );
    await subscribed;

    const time = Date.UTC(2026, 10, 29, 12, 0, 0);
    broker.publish(
      {
        cmd: 'publish',
        topic: 'application/app-1/device/a84041000181c0de/event/up',
        payload: Buffer.from(
          chirpstackUpJson({
            devEui: 'A84041000181C0DE',
            time,
            data: Buffer.from([1]),
            object: { temperature: 4.5 },
          }),
        ),
        qos: 1,
        retain: false,
        dup: false,
      },
      () => undefined,
    );
    await until(() => accepted.length === 1, 'the uplink accepted after two refusals', 10_000);
    expect(accepted[0]).toMatchObject({ device: 'a84041000181c0de', ts: time * 1000 });
    expect(counters.refused).toBe(2);
    expect(arrivals).toHaveLength(3);
    // A refusal that lasts backs off as a lost connection does (ceilings 50, then 100 ms), not at
    // the minimum each time.
    expect(arrivals[2]! - arrivals[1]!).toBeGreaterThanOrEqual(95);
  });
});
