import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, tempDir } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createSite } from '../../helpers/fixtures.ts';
import { createBridge, type BridgeBundle } from '../../helpers/mqtt.ts';

/**
 * Interoperability with a broker nobody here wrote: Debian's Mosquitto as a customer broker, in its
 * own process with its own config on a free port, bridged to the cloud with MQTT 5 and the bridge's
 * client certificate; the Mosquitto command-line clients talk to it as devices would.
 */
const run = promisify(execFile);

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

interface Proc {
  child: ChildProcess;
  output(): string;
  waitFor(pattern: RegExp): Promise<void>;
  exited: Promise<number | string>;
}

/** Starts a process; `stdbuf -oL` in front keeps a piped mosquitto_sub from holding back its lines. */
function start(command: string, args: string[]): Proc {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    out += chunk.toString();
    for (const l of listeners) l();
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise<number | string>((resolve) =>
    child.on('exit', (code, signal) => {
      resolve(code ?? signal ?? 'unknown');
      for (const l of listeners) l();
    }),
  );
  return {
    child,
    exited,
    output: () => out,
    waitFor: (pattern) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (pattern.test(out)) {
            listeners.delete(check);
            resolve();
          } else if (child.exitCode !== null || child.signalCode !== null) {
            listeners.delete(check);
            reject(new Error(`${command} ended before printing ${pattern}:\n${out}`));
          }
        };
        listeners.add(check);
        check();
      }),
  };
}

async function stop(p: Proc | undefined): Promise<void> {
  if (!p || p.child.exitCode !== null || p.child.signalCode !== null) return;
  p.child.kill('SIGTERM');
  await p.exited;
}

describe.each(DATABASES)('a customer Mosquitto bridged to the cloud, on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let siteId: string;
  let bundle: BridgeBundle;
  let dir: string;
  let port: number;
  let broker: Proc | undefined;
  const procs: Proc[] = [];

  const root = () => `service/${user.accountId}`;
  const local = ['-h', '127.0.0.1', '-V', 'mqttv5'];
  const devices = async () =>
    (await t.http.get(`/v1/devices?site_id=${siteId}`, { token: user.token })).json.data as Record<
      string,
      any
    >[];

  beforeEach(async () => {
    t = await startTestCloud({ db, mqtt: true });
    user = await signUp(t, 'ops@example.com');
    siteId = (await createSite(t, user.token)).id;
    bundle = await createBridge(t, user.token, siteId, 'Customer Mosquitto');
    dir = tempDir('sm-mosquitto-');
    fs.writeFileSync(path.join(dir, 'ca.pem'), bundle.ca_pem);
    fs.writeFileSync(path.join(dir, 'bridge.pem'), bundle.cert_pem);
    fs.writeFileSync(path.join(dir, 'bridge.key'), bundle.key_pem, { mode: 0o600 });
    port = await freePort();
    // The example of docs/api/mqtt.md, with Mosquitto's default bridge notifications left on.
    const config = [
      'user root',
      `listener ${port} 127.0.0.1`,
      'allow_anonymous true',
      'persistence false',
      'log_dest stdout',
      'log_type error',
      'log_type warning',
      'log_type notice',
      'connection cloud',
      `address 127.0.0.1:${t.cloud.mqttPort}`,
      'bridge_protocol_version mqttv50',
      `bridge_cafile ${path.join(dir, 'ca.pem')}`,
      `bridge_certfile ${path.join(dir, 'bridge.pem')}`,
      `bridge_keyfile ${path.join(dir, 'bridge.key')}`,
      `remote_clientid bridge-${bundle.id}`,
      'cleansession false',
      `topic ${root()}/# both 1`,
    ];
    fs.writeFileSync(path.join(dir, 'mosquitto.conf'), `${config.join('\n')}\n`);
    broker = start('mosquitto', ['-c', path.join(dir, 'mosquitto.conf')]);
    await eventually(
      async () =>
        (await t.http.get(`/v1/bridges/${bundle.id}`, { token: user.token })).json.connected === true,
      `the Mosquitto bridge to connect:\n${broker.output()}`,
    );
  });

  afterEach(async () => {
    for (const p of procs.splice(0)) await stop(p);
    await stop(broker);
    await t?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('carries a measurement and a last-will from mosquitto clients to the cloud, and identify back to a mosquitto_sub', async () => {
    // A measurement published to the local broker arrives, creating the device on the bridge's site.
    await run('mosquitto_pub', [
      ...local,
      '-p',
      String(port),
      '-q',
      '1',
      '-t',
      `${root()}/fridge-9`,
      '-m',
      JSON.stringify({ ts: '2026-01-05T10:00:00Z', measurements: [{ type: 'temperature', value: 3.5 }] }),
    ]);
    const device = await eventually(
      // The device row is committed before its first measurement: wait for the data, not the row.
      async () => (await devices()).find((d) => d.local_id === 'fridge-9' && d.online === true),
      'the measurement',
    );
    expect(device).toMatchObject({ model: 'mqtt-generic', online: true });
    const sensors = (await t.http.get(`/v1/devices/${device.id}/sensors`, { token: user.token })).json.data;
    expect(sensors).toEqual([
      expect.objectContaining({
        kind: 'temperature',
        last_value: 3.5,
        last_ts: '2026-01-05T10:00:00.000000Z',
      }),
    ]);

    // A device connected to the local broker with a last-will dies; Mosquitto publishes the will
    // (retained, QoS 1) and the bridge forwards it.
    const dying = start('stdbuf', [
      '-oL',
      'mosquitto_sub',
      ...local,
      '-p',
      String(port),
      '-d',
      '-i',
      'fridge-9',
      '-t',
      `${root()}/fridge-9/nothing`,
      '--will-topic',
      `${root()}/fridge-9/lwt`,
      '--will-payload',
      JSON.stringify({ status: 'offline', reason: 'power lost', at: '2026-01-05T10:00:00Z' }),
      '--will-qos',
      '1',
      '--will-retain',
    ]);
    procs.push(dying);
    await dying.waitFor(/SUBACK/);
    dying.child.kill('SIGKILL');
    await eventually(
      async () => (await devices()).find((d) => d.local_id === 'fridge-9')?.online === false,
      'the last-will',
    );

    // identify reaches a subscriber on the customer side.
    const listener = start('stdbuf', [
      '-oL',
      'mosquitto_sub',
      ...local,
      '-p',
      String(port),
      '-d',
      '-v',
      '-C',
      '1',
      '-t',
      `${root()}/+/cmd/identify`,
    ]);
    procs.push(listener);
    await listener.waitFor(/SUBACK/);
    const answer = await t.http.post(`/v1/devices/${device.id}/identify`, undefined, { token: user.token });
    expect(answer).toMatchObject({ status: 202, json: { status: 'sent' } });
    expect(await listener.exited).toBe(0);
    const line = listener
      .output()
      .split('\n')
      .find((l) => l.startsWith(`${root()}/fridge-9/cmd/identify `));
    expect(line).toBeDefined();
    expect(JSON.parse(line!.slice(line!.indexOf(' ') + 1))).toEqual({
      duration_s: 30,
      at: expect.any(String),
    });

    // The bridge stayed up throughout: Mosquitto's own $SYS notifications were accepted, not refused.
    expect(broker!.output()).not.toMatch(/Connection Refused|malformed|Not authorized/i);
  });

  it('is refused when the customer broker speaks MQTT 3.1.1 to the cloud', async () => {
    const direct = ['-h', '127.0.0.1', '-p', String(t.cloud.mqttPort), '--cafile', path.join(dir, 'ca.pem')];
    const certs = ['--cert', path.join(dir, 'bridge.pem'), '--key', path.join(dir, 'bridge.key')];
    const result = await run('mosquitto_pub', [
      ...direct,
      ...certs,
      '-V',
      'mqttv311',
      '-q',
      '1',
      '-t',
      `${root()}/x`,
      '-m',
      '{}',
    ]).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
    );
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/unacceptable protocol version/i);
    // The same client with MQTT 5 gets a reason code for an invalid payload.
    const v5 = await run('mosquitto_pub', [
      ...direct,
      ...certs,
      '-V',
      'mqttv5',
      '-q',
      '1',
      '-t',
      `${root()}/x`,
      '-m',
      'nope',
    ]);
    expect(`${v5.stdout}${v5.stderr}`).toMatch(/Payload format invalid/i);
  });
});
