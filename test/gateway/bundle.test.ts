import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ShellyHtGen1Emulator } from '../../hardware/emulators/shelly-ht-gen1.ts';
import { SerialSensorEmulator } from '../../hardware/emulators/serial-sensor.ts';
import { buildGateway, type GatewayBuild } from '../../scripts/build-gateway.ts';
import { GATEWAY_VERSION } from '../../gateway/src/gateway.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../helpers/cloud.ts';
import { eventually } from '../helpers/eventually.ts';
import { createSite } from '../helpers/fixtures.ts';
import { createBridge } from '../helpers/mqtt.ts';
import { channelPoints, deviceByLocalId, saveBundle } from './helpers/cloud-reads.ts';
import { tempDir, writeGatewayConfig } from './helpers/gateway.ts';
import { spawnGateway, type GatewayProcess } from './helpers/process.ts';

/**
 * The production build (`npm run build:gateway`): built into a folder outside the checkout, so
 * nothing can resolve from the project's node_modules, and run by plain `node gateway.mjs` against
 * a real cloud. It must do what the tsx start does: announce itself with its version, buffer Shelly
 * and serial readings (both native modules load from beside the bundle) and deliver them, and stop
 * cleanly on SIGTERM.
 */
let t: TestCloud;
let user: SignedIn;
let siteId: string;
let dir: string;
let build: GatewayBuild;
let serial: SerialSensorEmulator;
let configFile: string;
let gateway: GatewayProcess | null = null;

beforeAll(async () => {
  dir = tempDir('gw-bundle-');
  build = await buildGateway({ outdir: path.join(dir, 'app'), quiet: true });
  t = await startTestCloud({ mqtt: true, env: { RATE_LIMIT_MODE: 'warn' } });
  user = await signUp(t, 'bundle@example.com');
  siteId = (await createSite(t, user.token)).id;
  const bundle = await createBridge(t, user.token, siteId);
  serial = new SerialSensorEmulator({
    sensorPath: path.join(dir, 'sensor-end'),
    gatewayPath: path.join(dir, 'ttyUSB0'),
  });
  await serial.plug();
  configFile = writeGatewayConfig(path.join(dir, 'etc'), {
    bundle: (f) => saveBundle(f, t, bundle),
    gatewayId: 'gw-bundled',
    collectors: {
      shelly_http: { host: '127.0.0.1', port: 0 },
      serial: { ports: [{ path: serial.gatewayPath, device: 'probe-b', format: 'kv', reopen_min_ms: 50 }] },
    },
  });
}, 120_000);

afterAll(async () => {
  if (gateway) await gateway.kill('SIGTERM');
  await serial?.stop();
  await t?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('the bundled gateway', () => {
  it('is one script with the native modules beside it, and a package.json naming them', () => {
    expect(fs.readdirSync(path.dirname(build.bundle)).sort()).toEqual([
      'gateway.mjs',
      'node_modules',
      'package.json',
    ]);
    const pkg = JSON.parse(fs.readFileSync(path.join(path.dirname(build.bundle), 'package.json'), 'utf8'));
    expect(Object.keys(pkg.dependencies).sort()).toEqual(['@serialport/bindings-cpp', 'better-sqlite3']);
    // No TypeScript loader is needed or present.
    expect(fs.existsSync(path.join(path.dirname(build.bundle), 'node_modules', 'tsx'))).toBe(false);
  });

  it('validates a configuration with the exit codes of the tsx start', () => {
    const run = (...args: string[]) =>
      spawnSync(process.execPath, [build.bundle, ...args], { encoding: 'utf8', cwd: dir });
    const ok = run('--config', configFile, '--validate');
    expect(ok.status).toBe(0);
    expect(ok.stdout).toContain('valid (gateway id gw-bundled)');
    const missing = run('--config', path.join(dir, 'nope.yaml'), '--validate');
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain('config error');
  });

  it('runs under plain node and delivers Shelly and serial readings to the cloud', async () => {
    const gw = (gateway = await spawnGateway(configFile, { bundle: build.bundle }));
    const started = gw.logs.find((l) => l.msg === 'gateway started');
    expect(started).toMatchObject({ version: GATEWAY_VERSION, collectors: ['shelly-http', 'serial'] });

    const device = await eventually(async () => {
      const d = await deviceByLocalId(t, user.token, siteId, 'gw-bundled');
      return d?.online === true ? d : null;
    }, 'the gateway device, online');
    expect(device).toMatchObject({ model: 'gateway-pi', fw_version: GATEWAY_VERSION });

    const shelly = new ShellyHtGen1Emulator({
      url: `http://127.0.0.1:${gw.shellyHttpPort}/`,
      id: 'shellyht-B1',
    });
    for (const temp of [2.5, 2.75])
      expect(await shelly.report({ temperature: temp, humidity: 60 })).toBe(200);
    for (const temp of [7.5, 7.25]) await serial.send({ temperature: temp, humidity: 70 });
    const shellyTemps = await eventually(async () => {
      const p = await channelPoints(t, user.token, siteId, 'shellyht-B1', 'temperature');
      return p.length === 2 ? p : null;
    }, 'two Shelly temperatures');
    expect(shellyTemps.map((p) => p.value)).toEqual([2.5, 2.75]);
    const serialTemps = await eventually(async () => {
      const p = await channelPoints(t, user.token, siteId, 'probe-b', 'temperature');
      return p.length === 2 ? p : null;
    }, 'two serial temperatures');
    expect(serialTemps.map((p) => p.value)).toEqual([7.5, 7.25]);

    expect(await gw.kill('SIGTERM')).toBe(0);
    gateway = null;
    expect(gw.logs.at(-1)).toMatchObject({ msg: 'gateway stopped' });
  });
});
