import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import YAML from 'yaml';
import { Cloud } from '../cloud/src/cloud.ts';
import { loadConfig as loadCloudConfig } from '../cloud/src/config.ts';
import { createLogger as createCloudLogger } from '../cloud/src/logger.ts';
import type { ShellyHttpCollector } from '../gateway/src/collectors/shelly-http/shelly-http.collector.ts';
import type { ShellyMqttCollector } from '../gateway/src/collectors/shelly-mqtt/shelly-mqtt.collector.ts';
import { loadConfig as loadGatewayConfig } from '../gateway/src/config.ts';
import { Gateway } from '../gateway/src/gateway.ts';
import { createLogger as createGatewayLogger } from '../gateway/src/logger.ts';
import { ChirpstackEmulator } from '../hardware/emulators/chirpstack.ts';
import { ChirpstackWebhookEmulator } from '../hardware/emulators/lorawan-webhook.ts';
import { Repeat } from '../hardware/emulators/repeat.ts';
import { SerialSensorEmulator } from '../hardware/emulators/serial-sensor.ts';
import { ShellyHtGen1Emulator } from '../hardware/emulators/shelly-ht-gen1.ts';
import { ShellyPlusHtEmulator } from '../hardware/emulators/shelly-plus-ht.ts';
import { apiClient, setUpAccount } from './bench/lib.ts';

interface Device {
  id: string;
  local_id: string;
  model: string;
  online: boolean;
}

interface Sensor {
  channel_id: string;
  kind: string;
  label: string | null;
  unit: string;
}

/**
 * A one-time sign-in link to the dashboard, made the way a person gets one: the cloud's sign-in
 * request (POST /v1/auth/request) mails a code and a link, and the link is read from the mail in
 * the outbox (no SMTP_URL in the demo). Opened in a browser, it names the address to confirm (the
 * browser did not ask for it), then signs in and lands on /app/.
 */
async function dashboardLink(url: string, dataDir: string, email: string): Promise<string> {
  const outbox = path.join(dataDir, 'outbox');
  const before = new Set(fs.existsSync(outbox) ? fs.readdirSync(outbox) : []);
  const res = await fetch(`${url}/v1/auth/request`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email }),
  });
  if (res.status !== 200) throw new Error(`POST /v1/auth/request: ${res.status} ${await res.text()}`);
  for (let i = 0; i < 500; i++) {
    for (const file of fs.existsSync(outbox) ? fs.readdirSync(outbox) : []) {
      if (before.has(file)) continue;
      // Quoted-printable: soft line breaks and the encoded "=" undone.
      const text = fs
        .readFileSync(path.join(outbox, file), 'utf8')
        .replace(/=\r?\n/g, '')
        .replace(/=3D/g, '=');
      const link = /(https?:\/\/\S+\/app\/auth\/callback\?t=[^\s"<]+)/.exec(text)?.[1];
      if (link) return link;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('no sign-in mail with a link in the outbox');
}

/**
 * `npm run demo`: a cloud (SQLite, HTTP and the MQTT bridge), a gateway connected to it with the
 * bundle of POST /v1/bridges, and one of each emulated device (Shelly H&T Gen1 over HTTP, Shelly
 * Plus H&T over MQTT, a serial sensor on a socat pseudo-terminal, a ChirpStack MQTT integration
 * read by the gateway), and one LoRaWAN sensor arriving straight at the cloud over the ChirpStack
 * webhook of an inbound integration (POST /v1/integrations). Every
 * reading the REST API returns (GET /v1/channels/{id}/measurements) is printed as it arrives, after
 * a one-time link that opens the dashboard signed in, on the demo's account.
 * `--seconds N` stops after N seconds; `--interval S` sets the emulators' report interval.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string' },
      interval: { type: 'string', default: '3' },
      port: { type: 'string', default: '0' },
    },
  });
  const intervalMs = Number(values.interval) * 1000;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sensor-demo-'));
  const say = (line: string) => process.stdout.write(`${line}\n`);

  const cloudConfig = loadCloudConfig({
    PORT: values.port,
    HOST: '127.0.0.1',
    MQTT_PORT: '0',
    DATA_DIR: path.join(dir, 'cloud'),
    LOG_LEVEL: 'warn',
    // The printout below reads every channel every 2 s (some 420 reads a minute), beside whatever
    // the dashboard reads: above the default read budget, which a real account's scripts are held to.
    RATE_LIMIT_READ_PER_MIN: '6000',
  });
  const cloud = new Cloud({
    config: cloudConfig,
    log: createCloudLogger('warn', process.stderr),
    mqttListenPort: 0,
  });
  await cloud.start();
  say(`cloud: ${cloud.url} (MQTT bridge on mqtts://127.0.0.1:${cloud.mqttPort}), data in ${dir}`);

  const email = 'demo@example.com';
  const account = await setUpAccount(cloud.url, cloudConfig.dataDir, 0, { email, site: 'Demo kitchen' });
  const api = apiClient(cloud.url, account.token);
  const bundle = await api('POST', '/v1/bridges', { site_id: account.siteId, name: 'Demo Pi' });
  say(`signed up ${email}; site ${account.siteId}; bridge ${bundle.id} (topic root ${bundle.topic_root})`);
  say(`API token for your own calls: ${account.token}`);
  const link = await dashboardLink(cloud.url, cloudConfig.dataDir, email);
  say(
    `dashboard, signed in as ${email} (a one-time link, valid 10 minutes; confirm the address on the page it opens):\n  ${link}`,
  );
  const lorawan = await api('POST', '/v1/integrations', {
    kind: 'chirpstack',
    site_id: account.siteId,
    name: 'Demo ChirpStack',
  });
  say(
    `integration ${lorawan.id}: ChirpStack posts to ${lorawan.url} with Authorization: Bearer ${lorawan.token}`,
  );
  const webhook = new ChirpstackWebhookEmulator({
    url: lorawan.url!,
    token: lorawan.token!,
    devEuis: ['a84041000181c0ee'],
    encoding: 'protobuf',
  });
  const webhookRounds = new Repeat(async () => {
    for (const r of await webhook.round())
      if (r.status !== 200) say(`ChirpStack webhook for ${r.devEui}: ${r.status} ${r.body}`);
  }, intervalMs);

  const gwDir = path.join(dir, 'gateway');
  fs.mkdirSync(gwDir, { recursive: true });
  fs.writeFileSync(
    path.join(gwDir, 'bridge.json'),
    JSON.stringify({ ...bundle, mqtt_url: `mqtts://127.0.0.1:${cloud.mqttPort}` }),
  );
  const chirpstack = new ChirpstackEmulator({ devEui: 'a84041000181c0de', intervalMs });
  const chirpstackUrl = await chirpstack.serveBroker();
  let haveSocat = true;
  try {
    execFileSync('socat', ['-V'], { stdio: 'ignore' });
  } catch {
    haveSocat = false;
    say('socat is not installed (apt-get install socat): the serial sensor is left out');
  }
  const serial = new SerialSensorEmulator({
    sensorPath: path.join(dir, 'sensor-end'),
    gatewayPath: path.join(dir, 'ttyEMU0'),
    intervalMs,
  });
  if (haveSocat) await serial.plug();
  fs.writeFileSync(
    path.join(gwDir, 'gateway.yaml'),
    YAML.stringify({
      gateway: { id: 'gw-demo', data_dir: './data', log_level: 'warn', status_interval_s: 30 },
      uplink: { bundle: './bridge.json', reconnect_min_ms: 500, reconnect_max_ms: 5000 },
      // A free port: the cloud may already hold the page's usual 8080.
      status_page: { host: '127.0.0.1', port: 0 },
      collectors: {
        shelly_http: { host: '127.0.0.1', port: 0 },
        shelly_mqtt: { host: '127.0.0.1', port: 0 },
        ...(haveSocat
          ? { serial: { ports: [{ path: serial.gatewayPath, device: 'cellar-probe', format: 'kv' }] } }
          : {}),
        chirpstack: { url: chirpstackUrl, devices: { a84041000181c0de: { model: 'cayenne-lpp' } } },
      },
    }),
  );
  const gateway = new Gateway({
    config: loadGatewayConfig(path.join(gwDir, 'gateway.yaml')),
    log: createGatewayLogger('warn', process.stderr),
  });
  await gateway.start();
  const httpPort = gateway.collector<ShellyHttpCollector>('shelly-http').port;
  const mqttPort = gateway.collector<ShellyMqttCollector>('shelly-mqtt').port;
  say(
    `gateway: Shelly HTTP on 127.0.0.1:${httpPort}, Shelly MQTT on 127.0.0.1:${mqttPort}, ChirpStack broker ${chirpstackUrl}${haveSocat ? `, serial ${serial.gatewayPath}` : ''}`,
  );
  say(`gateway status page: http://127.0.0.1:${gateway.statusPage?.port}/`);

  const gen1 = new ShellyHtGen1Emulator({
    url: `http://127.0.0.1:${httpPort}/`,
    id: 'shellyht-EE45E9',
    intervalMs,
  });
  const plus = new ShellyPlusHtEmulator({
    brokerUrl: `mqtt://127.0.0.1:${mqttPort}`,
    id: 'shellyplusht-08b61fcb7f3c',
    intervalMs,
  });
  await plus.connect();
  await chirpstack.connect(chirpstackUrl);
  gen1.start();
  plus.start();
  chirpstack.start();
  webhookRounds.start();
  if (haveSocat) serial.start();
  say('devices reporting; readings as the REST API returns them:\n');

  // Print every new point of every channel of the site, as GET /v1/channels/{id}/measurements returns it.
  const seen = new Map<string, string>();
  const since = new Date(Date.now() - 3600_000).toISOString();
  const poll = async () => {
    const devices = (await api<{ data: Device[] }>('GET', `/v1/devices?site_id=${account.siteId}&limit=500`))
      .data;
    for (const d of devices) {
      for (const s of (await api<{ data: Sensor[] }>('GET', `/v1/devices/${d.id}/sensors`)).data) {
        const from = seen.get(s.channel_id) ?? since;
        const points = (
          await api<{ data: { ts: string; value: number }[] }>(
            'GET',
            `/v1/channels/${s.channel_id}/measurements?from=${encodeURIComponent(from)}&limit=500`,
          )
        ).data;
        for (const p of points) {
          if (p.ts === seen.get(s.channel_id)) continue;
          say(
            `${p.ts}  ${d.local_id.padEnd(26)} ${s.kind.padEnd(12)}${s.label ? `[${s.label}]` : ''} ${p.value} ${s.unit}  (${d.model}${d.online ? ', online' : ''})`,
          );
        }
        if (points.length) seen.set(s.channel_id, points[points.length - 1]!.ts);
      }
    }
  };
  const timer = setInterval(
    () => void poll().catch((err: unknown) => say(`poll failed: ${String(err)}`)),
    2000,
  );

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    clearInterval(timer);
    // The gateway first: stopped after the devices, it would warn that each of them went away.
    await gateway.stop();
    gen1.stop();
    webhookRounds.stop();
    await plus.disconnect();
    await serial.stop();
    await chirpstack.stop();
    await cloud.stop();
    say(`\nstopped. gateway status: ${JSON.stringify(gateway.status.snapshot().collectors)}`);
    fs.rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  if (values.seconds) setTimeout(() => void stop(), Number(values.seconds) * 1000);
}

main().catch((err: unknown) => {
  process.stderr.write(`demo failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
