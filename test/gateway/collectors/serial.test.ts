import { afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import path from 'node:path';
import { parseKvLine, parseVaisalaLine } from '../../../gateway/src/collectors/serial/lines.ts';
import { SerialSensorEmulator } from '../../../hardware/emulators/serial-sensor.ts';
import { LocalBridge } from '../helpers/bridge.ts';
import { localBundle, startTestGateway, tempDir, until, writeGatewayConfig } from '../helpers/gateway.ts';
import { makePki, type TestPki } from '../helpers/pki.ts';

/**
 * The serial collector over a real pseudo-terminal pair (socat), through the real uplink: lines
 * become readings, and the port is reopened after the "adapter" is unplugged and plugged back.
 */
let pki: TestPki;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(() => {
  pki = makePki(tempDir('gw-pki-'));
});

afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function setUp(format: 'kv' | 'vaisala', device: string) {
  const dir = tempDir('gw-serial-');
  const sensor = new SerialSensorEmulator({
    sensorPath: path.join(dir, 'sensor-end'),
    gatewayPath: path.join(dir, 'ttyUSB0'),
    format,
  });
  cleanups.push(async () => {
    await sensor.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await sensor.plug();
  const bridge = new LocalBridge(pki);
  await bridge.start();
  cleanups.push(() => bridge.stop());
  const file = writeGatewayConfig(dir, {
    bundle: localBundle(pki, bridge.url),
    collectors: {
      serial: {
        ports: [{ path: sensor.gatewayPath, device, format, reopen_min_ms: 50, reopen_max_ms: 200 }],
      },
    },
  });
  const gw = await startTestGateway(file);
  cleanups.push(() => gw.stop());
  const counters = () => gw.gateway.status.snapshot().collectors.serial!;
  await until(() => counters().state === 'open', 'the port to open');
  const readingsOf = (d: string) =>
    bridge.readings().filter((m) => m.topic === `service/${pki.accountId}/${d}`);
  return { sensor, bridge, gw, counters, readingsOf };
}

describe('serial collector on a pseudo-terminal', () => {
  it('turns key=value lines into readings with the gateway receive time', async () => {
    const { sensor, bridge, readingsOf } = await setUp('kv', 'cellar-probe');
    const before = Date.now();
    await sensor.send({ temperature: 4.5, humidity: 70, battery: 90 });
    await bridge.waitFor(() => readingsOf('cellar-probe').length === 1, 'the reading');
    const [reading] = readingsOf('cellar-probe');
    expect(reading!.body.measurements).toEqual([
      { type: 'temperature', value: 4.5 },
      { type: 'humidity', value: 70 },
      { type: 'battery', value: 90 },
    ]);
    const ts = Date.parse(reading!.body.ts);
    expect(ts).toBeGreaterThanOrEqual(before - 1);
    expect(ts).toBeLessThanOrEqual(Date.now());
  });

  it('reopens the port after it is unplugged and plugged back, losing no line sent while open', async () => {
    const { sensor, bridge, counters, readingsOf } = await setUp('kv', 'cellar-probe');
    for (const t of [1, 2, 3]) await sensor.send({ temperature: t, humidity: 50 });
    await bridge.waitFor(() => readingsOf('cellar-probe').length === 3, 'three readings');

    await sensor.unplug();
    await until(() => counters().state === 'waiting for port', 'the collector to notice the unplug');
    expect(counters().errors).toBeGreaterThanOrEqual(1);

    await sensor.plug();
    await until(() => counters().state === 'open', 'the port to reopen');
    for (const t of [4, 5, 6]) await sensor.send({ temperature: t, humidity: 50 });
    await bridge.waitFor(() => readingsOf('cellar-probe').length === 6, 'six readings');
    expect(readingsOf('cellar-probe').map((m) => m.body.measurements[0].value)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(counters().accepted).toBe(6);
  });

  it('reads the Vaisala line format, and a key=value line may name its device and time', async () => {
    const { sensor, bridge, readingsOf } = await setUp('vaisala', 'hmp155');
    await sensor.send({ temperature: 22.3, humidity: 45.2 });
    await bridge.waitFor(() => readingsOf('hmp155').length === 1, 'the Vaisala reading');
    expect(readingsOf('hmp155')[0]!.body.measurements).toEqual([
      { type: 'humidity', value: 45.2 },
      { type: 'temperature', value: 22.3 },
    ]);
  });
});

describe('serial collector with a full buffer', () => {
  it('counts a line the buffer refuses as refused and lost, in the status and the log', async () => {
    const dir = tempDir('gw-serial-full-');
    const sensor = new SerialSensorEmulator({
      sensorPath: path.join(dir, 'sensor-end'),
      gatewayPath: path.join(dir, 'ttyUSB0'),
      format: 'kv',
    });
    cleanups.push(async () => {
      await sensor.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    });
    await sensor.plug();
    // No cloud to drain to (nothing listens on port 1), and room for three rows: the device's info
    // and two readings.
    const file = writeGatewayConfig(dir, {
      bundle: localBundle(pki, 'mqtts://127.0.0.1:1'),
      buffer: { capacity: 3 },
      collectors: {
        serial: {
          ports: [{ path: sensor.gatewayPath, device: 'probe', format: 'kv', reopen_min_ms: 50 }],
        },
      },
    });
    const gw = await startTestGateway(file);
    cleanups.push(() => gw.stop());
    const counters = () => gw.gateway.status.snapshot().collectors.serial!;
    await until(() => counters().state === 'open', 'the port to open');

    for (const t of [1, 2, 3, 4, 5]) await sensor.send({ temperature: t, humidity: 50 });
    await until(() => counters().accepted + counters().refused === 5, 'five lines judged');
    expect(counters()).toMatchObject({ received: 5, accepted: 2, refused: 3, lost: 3, invalid: 0 });
    expect(gw.gateway.status.snapshot().buffer.depth).toBe(3);
    const lostLines = gw.logs.filter((l) => l.msg === 'serial reading lost: not accepted');
    expect(lostLines.map((l) => [l.code, l.line])).toEqual([
      ['buffer_full', expect.stringContaining('temperature=3')],
      ['buffer_full', expect.stringContaining('temperature=4')],
      ['buffer_full', expect.stringContaining('temperature=5')],
    ]);
  });
});

describe('serial line formats', () => {
  it('reads key=value pairs with aliases, labels, battery volts, device and time', () => {
    const line = parseKvLine(
      'id=cellar-2;t=12.5;rh=80;temperature.probe2=-18.4;bat_v=3.1;ts=2026-01-05T10:00:00+01:00;foo=1',
    );
    expect(line.device).toBe('cellar-2');
    expect(line.ts).toBe(Date.UTC(2026, 0, 5, 9) * 1000);
    expect(line.measurements).toEqual([
      { kind: 'temperature', value: 12.5, label: null, unit: '°C' },
      { kind: 'humidity', value: 80, label: null, unit: '%' },
      { kind: 'temperature', value: -18.4, label: 'probe2', unit: '°C' },
      { kind: 'battery', value: 3.1, label: null, unit: 'V' },
    ]);
  });

  it('drops values that are not numbers and takes Unix seconds as a time', () => {
    const line = parseKvLine('temperature=nan humidity=55 ts=1767607200');
    expect(line.measurements.map((m) => m.kind)).toEqual(['humidity']);
    expect(line.ts).toBe(1767607200 * 1e6);
  });

  it('refuses a value outside its sanity range rather than clamping it', () => {
    expect(() => parseKvLine('humidity=140')).toThrow(/sanity range/);
  });

  it('reads Vaisala output with Fahrenheit, pressure, CO2 and a sensor fault', () => {
    expect(
      parseVaisalaLine("RH= ***.* %RH T= 71.6 'F P= 101.3 kPa CO2= 812 ppm Td= 10.1 'C").measurements,
    ).toEqual([
      { kind: 'temperature', value: 22, label: null, unit: '°C' },
      { kind: 'pressure', value: 1013, label: null, unit: 'hPa' },
      { kind: 'co2', value: 812, label: null, unit: 'ppm' },
    ]);
  });
});
