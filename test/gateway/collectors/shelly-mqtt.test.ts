import { afterEach, describe, expect, it } from '@jest/globals';
import mqtt from 'mqtt';
import { Writable } from 'node:stream';
import { systemClock } from '../../../gateway/src/clock.ts';
import { ShellyMqttCollector } from '../../../gateway/src/collectors/shelly-mqtt/shelly-mqtt.collector.ts';
import { createLogger } from '../../../gateway/src/logger.ts';
import type { DeviceState, Reading } from '../../../gateway/src/reading.ts';
import { GatewayStatus } from '../../../gateway/src/status.ts';
import { until } from '../helpers/gateway.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/**
 * A Shelly Plus H&T with a custom topic prefix (`kitchen`) on the gateway's broker, through a real
 * MQTT client: its NotifyStatus names it by `src`, its plain status topics and `online` by the prefix.
 * Both are one device, the one NotifyStatus names, with the device's own time.
 */
describe('Shelly MQTT with a custom topic prefix', () => {
  it('keeps one device: the status topics under the prefix are the NotifyStatus device', async () => {
    const readings: Reading[] = [];
    const states: DeviceState[] = [];
    const collector = new ShellyMqttCollector({
      config: { enabled: true, host: '127.0.0.1', port: 0 },
      sink: {
        accept: (r) => Promise.resolve(void readings.push(r)),
        deviceInfo: () => Promise.resolve(),
        deviceState: (s) => Promise.resolve(void states.push(s)),
      },
      clock: systemClock,
      log: createLogger('error', new Writable({ write: (_c, _e, done) => done() })),
      counters: new GatewayStatus().collector('shelly-mqtt'),
    });
    await collector.start(new AbortController().signal);
    cleanups.push(() => collector.stop());
    const device = await mqtt.connectAsync(`mqtt://127.0.0.1:${collector.port}`, {
      clientId: 'shellyplusht-abc',
    });
    cleanups.push(() => device.endAsync());

    const src = 'shellyplusht-08b61fcb7f3c';
    await device.publishAsync(
      'kitchen/events/rpc',
      JSON.stringify({
        src,
        dst: 'kitchen/events',
        method: 'NotifyStatus',
        params: { ts: 1795996800.25, 'temperature:0': { id: 0, tC: 4.5 } },
      }),
      { qos: 1 },
    );
    await device.publishAsync('kitchen/status/temperature:0', JSON.stringify({ id: 0, tC: 4.5 }), { qos: 1 });
    await device.publishAsync('kitchen/online', 'false', { qos: 1 });
    await until(() => states.length === 1, 'the last-will state');
    expect(readings).toEqual([
      {
        device: src,
        ts: 1795996800250000,
        measurements: [expect.objectContaining({ kind: 'temperature', value: 4.5 })],
      },
    ]);
    expect(states.map((s) => [s.device, s.status])).toEqual([[src, 'offline']]);
  });
});
