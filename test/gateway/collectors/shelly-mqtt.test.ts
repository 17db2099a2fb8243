import { afterEach, describe, expect, it } from '@jest/globals';
import mqtt from 'mqtt';
import path from 'node:path';
import { Writable } from 'node:stream';
import { ReadingQueue } from '../../../gateway/src/buffer/reading-queue.ts';
import { systemClock } from '../../../gateway/src/clock.ts';
import type { CollectorMemory } from '../../../gateway/src/collector.ts';
import {
  RPC_FRESH_MS,
  ShellyMqttCollector,
} from '../../../gateway/src/collectors/shelly-mqtt/shelly-mqtt.collector.ts';
import { createLogger } from '../../../gateway/src/logger.ts';
import type { DeviceState, Reading } from '../../../gateway/src/reading.ts';
import { GatewayStatus } from '../../../gateway/src/status.ts';
import { tempDir, until } from '../helpers/gateway.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

const quiet = () => createLogger('error', new Writable({ write: (_c, _e, done) => done() }));
const SRC = 'shellyplusht-08b61fcb7f3c';

/** A broker collector on a free port, what it hands on, and a connected device (a real MQTT client). */
async function startShelly(memory: CollectorMemory, monotonicMs?: () => number) {
  const readings: Reading[] = [];
  const states: DeviceState[] = [];
  const collector = new ShellyMqttCollector(
    {
      config: { enabled: true, host: '127.0.0.1', port: 0 },
      sink: {
        accept: (r) => Promise.resolve(void readings.push(r)),
        deviceInfo: () => Promise.resolve(),
        deviceState: (s) => Promise.resolve(void states.push(s)),
      },
      clock: systemClock,
      log: quiet(),
      counters: new GatewayStatus().collector('shelly-mqtt'),
      memory,
    },
    monotonicMs,
  );
  await collector.start(new AbortController().signal);
  cleanups.push(() => collector.stop());
  const device = await mqtt.connectAsync(`mqtt://127.0.0.1:${collector.port}`, {
    clientId: 'shellyplusht-abc',
  });
  cleanups.push(() => device.endAsync());
  const notify = (prefix: string, ts: number, tC: number) =>
    device.publishAsync(
      `${prefix}/events/rpc`,
      JSON.stringify({
        src: SRC,
        dst: `${prefix}/events`,
        method: 'NotifyStatus',
        params: { ts, 'temperature:0': { id: 0, tC } },
      }),
      { qos: 1 },
    );
  const status = (prefix: string, tC: number) =>
    device.publishAsync(`${prefix}/status/temperature:0`, JSON.stringify({ id: 0, tC }), { qos: 1 });
  return { collector, device, readings, states, notify, status };
}

const inMemory = (): CollectorMemory => {
  const kept = new Map<string, string>();
  return { recall: () => new Map(kept), remember: (k, v) => void kept.set(k, v) };
};

/**
 * A Shelly Plus H&T with a custom topic prefix (`kitchen`) on the gateway's broker, through a real
 * MQTT client: its NotifyStatus names it by `src`, its plain status topics and `online` by the prefix.
 * Both are one device, the one NotifyStatus names, with the device's own time.
 */
describe('Shelly MQTT with a custom topic prefix', () => {
  it('keeps one device: the status topics under the prefix are the NotifyStatus device', async () => {
    const { device, readings, states, notify, status } = await startShelly(inMemory());
    await notify('kitchen', 1795996800.25, 4.5);
    await status('kitchen', 4.5);
    await device.publishAsync('kitchen/online', 'false', { qos: 1 });
    await until(() => states.length === 1, 'the last-will state');
    expect(readings).toEqual([
      {
        device: SRC,
        ts: 1795996800250000,
        measurements: [expect.objectContaining({ kind: 'temperature', value: 4.5 })],
      },
    ]);
    expect(states.map((s) => [s.device, s.status])).toEqual([[SRC, 'offline']]);
  });

  it('still knows the prefix after a restart of the gateway: no device named after the prefix', async () => {
    const dir = tempDir('sm-shelly-');
    const queue = new ReadingQueue({ file: path.join(dir, 'buffer.db'), capacity: 100, log: quiet() });
    const memory: CollectorMemory = {
      recall: () => queue.recall('shelly-mqtt'),
      remember: (k, v) => void queue.remember('shelly-mqtt', k, v),
    };
    queue.open();
    const before = await startShelly(memory);
    await before.notify('kitchen', 1795996800.25, 4.5);
    await until(() => before.readings.length === 1, 'the notification');
    while (cleanups.length) await cleanups.pop()!();
    queue.close();

    queue.open();
    cleanups.push(() => Promise.resolve(queue.close()));
    const after = await startShelly(memory);
    // The device wakes: its retained `online`, then its status topics before its NotifyStatus.
    await after.device.publishAsync('kitchen/online', 'true', { qos: 1 });
    await after.status('kitchen', 4.6);
    await until(() => after.states.length === 1 && after.readings.length === 1, 'the wake-up');
    expect(after.states.map((s) => [s.device, s.status])).toEqual([[SRC, 'online']]);
    expect(after.readings.map((r) => [r.device, r.measurements[0]!.value])).toEqual([[SRC, 4.6]]);
  });

  it('hears the status topics again once the NotifyStatus have stopped for RPC_FRESH_MS', async () => {
    let now = 1_000;
    const { readings, notify, status } = await startShelly(inMemory(), () => now);
    await notify('kitchen', 1795996800.25, 4.5);
    now += 60_000;
    await status('kitchen', 4.5); // the same value as the notification, without a time: skipped
    now += RPC_FRESH_MS;
    await status('kitchen', 4.7); // RPC notifications turned off on the device: its only reading
    await until(() => readings.length === 2, 'the status reading');
    expect(readings.map((r) => [r.device, r.measurements[0]!.value, r.ts !== null])).toEqual([
      [SRC, 4.5, true],
      [SRC, 4.7, false],
    ]);
  });
});
