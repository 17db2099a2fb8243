import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { ConfigError, FileSchema, loadConfig } from '../../gateway/src/config.ts';
import { ROOT } from '../helpers/process.ts';
import { LocalBridge } from './helpers/bridge.ts';
import { localBundle, tempDir, writeGatewayConfig } from './helpers/gateway.ts';
import { makePki, writeBundle, type TestPki } from './helpers/pki.ts';

const run = promisify(execFile);
let pki: TestPki;
let dir: string;

beforeAll(() => {
  pki = makePki(tempDir('gw-pki-'));
  dir = tempDir('gw-config-');
});

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function configWith(yaml: string): string {
  const sub = fs.mkdtempSync(path.join(dir, 'c-'));
  writeBundle(path.join(sub, 'bridge.json'), pki, 'mqtts://127.0.0.1:8883');
  fs.writeFileSync(path.join(sub, 'gateway.yaml'), yaml);
  return path.join(sub, 'gateway.yaml');
}

describe('gateway configuration', () => {
  it('the shipped example validates, into a frozen object', () => {
    const file = configWith(fs.readFileSync(path.join(ROOT, 'hardware/pi/gateway.example.yaml'), 'utf8'));
    const config = loadConfig(file);
    expect(config.gatewayId).toBe('gw-coldroom');
    expect(config.uplink.topicRoot).toBe(`service/${pki.accountId}/`);
    expect(config.uplink.accountId).toBe(pki.accountId);
    expect(config.uplink.url).toBe('mqtts://127.0.0.1:8883');
    expect(config.uplink.certSubject).toContain(pki.accountId);
    expect(config.collectors.shelly_http?.port).toBe(8081);
    expect(config.collectors.shelly_mqtt?.port).toBe(1883);
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.collectors.shelly_http)).toBe(true);
  });

  it('the shipped example names every key the file may hold', () => {
    const example = fs.readFileSync(path.join(ROOT, 'hardware/pi/gateway.example.yaml'), 'utf8');
    const missing = schemaKeys(FileSchema).filter(
      (key) => !new RegExp(`(^|[\\s{#,])${key}:`, 'm').test(example),
    );
    expect(missing).toEqual([]);
  });

  it.each([
    ['a typo in a key', 'uplink: { bundle: ./bridge.json, inflite: 5 }', /inflite/],
    [
      'a port out of range',
      'uplink: { bundle: ./bridge.json }\ncollectors: { shelly_mqtt: { port: 70000 } }',
      /collectors\.shelly_mqtt\.port/,
    ],
    ['a missing bundle', 'uplink: { bundle: ./nope.json }', /uplink\.bundle: cannot read/],
    ['a device id with a slash', 'uplink: { bundle: ./bridge.json }\ngateway: { id: "a/b" }', /gateway\.id/],
    [
      'half a login',
      'uplink: { bundle: ./bridge.json }\ncollectors: { shelly_mqtt: { username: x } }',
      /username and password/,
    ],
    ['a plain mqtt:// uplink', 'uplink: { bundle: ./bridge.json, url: "mqtt://x:1883" }', /mqtts/],
    // Node fires a timer of more than 2^31 - 1 ms at once: a reconnect in a tight loop.
    [
      'a wait past what a timer holds',
      'uplink: { bundle: ./bridge.json, reconnect_max_ms: 3000000000 }',
      /uplink\.reconnect_max_ms/,
    ],
    [
      'a wait that spins',
      'uplink: { bundle: ./bridge.json, reconnect_min_ms: 1 }',
      /uplink\.reconnect_min_ms/,
    ],
    [
      'a status line every millisecond',
      'uplink: { bundle: ./bridge.json }\ngateway: { status_interval_s: 0.001 }',
      /gateway\.status_interval_s/,
    ],
  ])('refuses %s with a message naming it', (_what, yaml, message) => {
    expect(() => loadConfig(configWith(yaml))).toThrow(ConfigError);
    expect(() => loadConfig(configWith(yaml))).toThrow(message);
  });
});

describe('npm run gateway -- --check', () => {
  const gateway = (args: string[]) =>
    run(process.execPath, ['--import', 'tsx', 'gateway/src/main.ts', ...args], { cwd: ROOT }).then(
      (r) => ({ code: 0, out: r.stdout }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }),
    );

  it('probes the uplink and each collector and says what it found', async () => {
    const bridge = new LocalBridge(pki);
    await bridge.start();
    try {
      const file = writeGatewayConfig(fs.mkdtempSync(path.join(dir, 'k-')), {
        bundle: localBundle(pki, bridge.url),
        collectors: {
          shelly_http: { host: '127.0.0.1', port: 0 },
          shelly_mqtt: { host: '127.0.0.1', port: 0 },
        },
      });
      const { code, out } = await gateway(['--config', file, '--check']);
      expect(out).toContain('valid');
      expect(out).toMatch(/ok +uplink\n.*connected: MQTT 5 over mutual TLS accepted/s);
      expect(out).toMatch(/ok +shelly-http/);
      expect(out).toMatch(/ok +shelly-mqtt/);
      expect(out).toContain('all checks passed');
      expect(code).toBe(0);
      expect(bridge.connects.some((c) => c.clientId === 'gw-test-check' && c.version === 5)).toBe(true);
    } finally {
      await bridge.stop();
    }
  });

  it('fails with exit 1 when the bridge cannot be reached, and 2 on a bad configuration', async () => {
    const file = writeGatewayConfig(fs.mkdtempSync(path.join(dir, 'k-')), {
      bundle: localBundle(pki, 'mqtts://127.0.0.1:1'),
      uplink: { connect_timeout_ms: 2000 },
    });
    const down = await gateway(['--config', file, '--check']);
    expect(down.out).toMatch(/FAIL uplink/);
    expect(down.code).toBe(1);
    const bad = await gateway(['--config', configWith('uplink: {}'), '--check']);
    expect(bad.code).toBe(2);
    expect(bad.out).toMatch(/config error: .*uplink\.bundle/);
    const valid = await gateway(['--config', configWith('uplink: { bundle: ./bridge.json }'), '--validate']);
    expect(valid.code).toBe(0);
  });
});

interface SchemaDef {
  type: string;
  shape?: Record<string, { _zod: { def: SchemaDef } }>;
  innerType?: { _zod: { def: SchemaDef } };
  element?: { _zod: { def: SchemaDef } };
  valueType?: { _zod: { def: SchemaDef } };
  in?: { _zod: { def: SchemaDef } };
}

/** Every object key of a zod schema, at any depth (through defaults, arrays and records' values). */
function schemaKeys(schema: { _zod: { def: SchemaDef } }): string[] {
  const def = schema._zod.def;
  if (def.shape) return Object.entries(def.shape).flatMap(([key, inner]) => [key, ...schemaKeys(inner)]);
  const inner = def.innerType ?? def.element ?? def.valueType ?? def.in;
  return inner ? schemaKeys(inner) : [];
}
