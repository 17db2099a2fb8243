import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { loadConfig } from '../../gateway/src/config.ts';
import { gen1CountCheck, physicalGatewayConfig } from '../../scripts/hil/physical.ts';
import {
  parsePhysicalConfig,
  PhysicalConfigError,
  readPhysicalConfig,
} from '../../scripts/hil/physical-config.ts';
import { makePki, writeBundle, type TestPki } from '../gateway/helpers/pki.ts';
import { tempDir } from '../helpers/databases.ts';
import { ROOT } from '../helpers/process.ts';

/**
 * The physical rig's file (scripts/hil/physical-config.ts): the shipped example is read as written,
 * mistakes are named, and the gateway configuration the rig makes from it is one the gateway takes.
 * (Running the physical rig needs the devices: docs/hil.md.)
 */

const EXAMPLE = path.join(ROOT, 'hardware/hil/physical.example.yaml');
let pki: TestPki;
let dir: string;
beforeAll(() => {
  dir = tempDir('hil-physical-');
  pki = makePki(path.join(dir, 'pki'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const minimal = (extra: string) => `lan: { interface: eth1, address: 192.168.50.1/24 }\n${extra}`;

describe('the physical rig file', () => {
  it('reads the shipped example, with the long form as the default timeline', () => {
    const c = readPhysicalConfig(EXAMPLE);
    expect(c.lan).toEqual({ interface: 'enx00e04c680001', address: '192.168.50.1/24' });
    expect(c.shelly_gen1).toEqual([{ id: 'shellyht-EE45E9', ip: '192.168.50.20' }]);
    expect(c.shelly_plus[0]!.id).toBe('shellyplusht-08b61fcb7f3c');
    expect(c.serial[0]).toMatchObject({ device: 'cellar-probe', baud_rate: 9600, format: 'kv' });
    expect(c.serial[0]!.writer).toMatch(/^\/dev\/serial\/by-id\//);
    expect(c.chirpstack?.devices[0]).toEqual({
      dev_eui: 'a84041000181c0de',
      model: 'dragino-lht65',
      kind: 'temperature',
      label: null,
    });
    expect(c.timeline).toEqual({ warm_s: 60, delay_s: 60, cut_s: 600, after_s: 120, serial_interval_s: 5 });
    const short = parsePhysicalConfig(
      minimal('shelly_gen1: [{ id: a, ip: 10.0.0.2 }]\ntimeline: { cut_s: 30 }'),
    );
    expect(short.timeline.cut_s).toBe(30);
    expect(short.timeline.warm_s).toBe(60);
  });

  it('names each mistake by its path', () => {
    const error = (text: string) => {
      try {
        parsePhysicalConfig(text, 'rig.yaml');
      } catch (err) {
        expect(err).toBeInstanceOf(PhysicalConfigError);
        return (err as Error).message;
      }
      throw new Error('accepted');
    };
    expect(error('shelly_gen1: []')).toMatch(/^rig\.yaml: lan: /);
    expect(error(minimal(''))).toMatch(/list at least one device/);
    expect(error(minimal('shelly_gen1: [{ id: a, ip: 192.168.50.300 }]'))).toMatch(/shelly_gen1\.0\.ip/);
    expect(error(minimal('serial: [{ port: COM3, device: a }]'))).toMatch(/serial\.0\.port/);
    expect(
      error(minimal('chirpstack: { url: mqtt://cs:1883, devices: [{ dev_eui: A84041000181C0DE }] }')),
    ).toMatch(/chirpstack\.devices\.0\.dev_eui: 16 lower-case hex digits/);
    expect(
      error(
        minimal('chirpstack: { url: mqtt://cs:1883, username: u, devices: [{ dev_eui: a84041000181c0de }] }'),
      ),
    ).toMatch(/both username and password/);
    expect(error(minimal('shelly_gen1: [{ id: a, ip: 10.0.0.2 }]\nshely_plus: []'))).toMatch(/shely_plus/);
    expect(
      error(minimal('shelly_gen1: [{ id: a, ip: 10.0.0.2 }]\nshelly_plus: [{ id: a, ip: 10.0.0.3 }]')),
    ).toMatch(/device a is listed twice/);
    expect(
      error(
        minimal(
          'serial: [{ port: /dev/ttyUSB0, device: a }, { port: /dev/ttyUSB1, writer: /dev/ttyUSB0, device: b }]',
        ),
      ),
    ).toMatch(/serial port \/dev\/ttyUSB0 is listed twice/);
    expect(error('lan: [')).toMatch(/not valid YAML/);
    expect(() => readPhysicalConfig(path.join(dir, 'missing.yaml'))).toThrow(/cannot read/);
  });

  it('makes a gateway configuration the gateway loads, with a collector per kind of device listed', () => {
    const gwDir = path.join(dir, 'gw');
    fs.mkdirSync(gwDir);
    writeBundle(path.join(gwDir, 'bridge.json'), pki, 'mqtts://10.200.0.2:8883');
    fs.writeFileSync(
      path.join(gwDir, 'gateway.yaml'),
      YAML.stringify(physicalGatewayConfig(readPhysicalConfig(EXAMPLE))),
    );
    const config = loadConfig(path.join(gwDir, 'gateway.yaml'));
    expect(config.collectors.shelly_http?.port).toBe(8081);
    expect(config.collectors.shelly_mqtt?.port).toBe(1883);
    expect(config.collectors.serial?.ports[0]).toMatchObject({
      path: '/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A10K1ABC-if00-port0',
      device: 'cellar-probe',
    });
    expect(config.collectors.chirpstack).toMatchObject({
      url: 'mqtt://192.168.50.10:1883',
      encoding: 'json',
      devices: { a84041000181c0de: { model: 'dragino-lht65' } },
    });
    // Only the collectors of the devices listed.
    const onlyPlus = physicalGatewayConfig(
      parsePhysicalConfig(minimal('shelly_plus: [{ id: p, ip: 10.0.0.2 }]')),
    );
    expect(Object.keys(onlyPlus.collectors as object)).toEqual(['shelly_mqtt']);
  });

  it('checks Shelly Gen1 devices by count since the run began', () => {
    const p = (device: string, ts: number) => ({ device, kind: 'temperature', label: null, ts, value: 5 });
    const points = [p('a', 50), p('a', 150), p('b', 160), p('c', 170)];
    expect(gen1CountCheck(['a', 'b'], 2, points, 100)).toMatchObject({ inCloud: 2, lost: 0, unexpected: 0 });
    expect(gen1CountCheck(['a', 'b'], 3, points, 100)).toMatchObject({ lost: 1 });
    expect(gen1CountCheck(['a', 'b'], 1, points, 100)).toMatchObject({ unexpected: 1 });
  });
});
