import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { checkListen } from '../../../gateway/src/collectors/listen-check.ts';
import { ShellyHttpCollector } from '../../../gateway/src/collectors/shelly-http/shelly-http.collector.ts';
import { ShellyMqttCollector } from '../../../gateway/src/collectors/shelly-mqtt/shelly-mqtt.collector.ts';
import type { CollectorDeps } from '../../../gateway/src/collector.ts';

/** The listening collectors' `--check`: one check, run against a free port and a port in use. */
describe('the listen check of the Shelly collectors', () => {
  const taken = net.createServer();
  let busyPort = 0;

  beforeAll(async () => {
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', () => resolve()));
    busyPort = (taken.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => taken.close(() => resolve()));
  });

  it('answers ok on a free port and releases it again', async () => {
    const result = await checkListen('127.0.0.1', 0, 'testing');
    expect(result).toEqual({ ok: true, details: ['can listen on 127.0.0.1:0 for testing'] });
  });

  it('answers not ok, with the reason, on a port in use', async () => {
    const result = await checkListen('127.0.0.1', busyPort, 'testing');
    expect(result.ok).toBe(false);
    expect(result.details).toEqual([
      expect.stringMatching(`^cannot listen on 127.0.0.1:${busyPort}: .*EADDRINUSE`),
    ]);
  });

  it('is what both Shelly collectors run', async () => {
    const deps = {} as CollectorDeps;
    const http = new ShellyHttpCollector({ ...deps, config: { host: '127.0.0.1', port: busyPort } } as never);
    const mqtt = new ShellyMqttCollector({ ...deps, config: { host: '127.0.0.1', port: busyPort } } as never);
    const signal = new AbortController().signal;
    expect((await http.check(signal)).ok).toBe(false);
    expect((await mqtt.check(signal)).ok).toBe(false);
    const free = { host: '127.0.0.1', port: 0 };
    const httpFree = new ShellyHttpCollector({ ...deps, config: free } as never);
    const mqttFree = new ShellyMqttCollector({ ...deps, config: free } as never);
    expect((await httpFree.check(signal)).details).toEqual([
      'can listen on 127.0.0.1:0 for Shelly URL actions',
    ]);
    expect((await mqttFree.check(signal)).details).toEqual([
      'can listen on 127.0.0.1:0 for Shelly MQTT devices (without authentication)',
    ]);
  });
});
