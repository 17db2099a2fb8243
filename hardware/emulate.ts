import path from 'node:path';
import { parseArgs } from 'node:util';
import { ChirpstackEmulator } from './emulators/chirpstack.ts';
import { ChirpstackWebhookEmulator } from './emulators/lorawan-webhook.ts';
import { SerialSensorEmulator } from './emulators/serial-sensor.ts';
import { ShellyHtGen1Emulator } from './emulators/shelly-ht-gen1.ts';
import { ShellyPlusHtEmulator } from './emulators/shelly-plus-ht.ts';

/**
 * `npm run emulate -- <device> [options]`: one emulated device reporting until Ctrl-C.
 *
 *   shelly-ht-gen1  --url http://127.0.0.1:8081/ [--id shellyht-EE45E9]
 *   shelly-plus-ht  --broker mqtt://127.0.0.1:1883 [--id shellyplusht-08b61fcb7f3c]
 *   serial          --link /tmp/ttyEMU0 [--format kv|vaisala]   (needs socat; point the gateway at --link)
 *   chirpstack      --broker mqtt://127.0.0.1:1884 | --serve 1884 [--dev-eui a84041000181c0de] [--encoding json|protobuf]
 *   chirpstack-webhook --token whk_... [--url http://localhost:8080/v1/webhooks/chirpstack]
 *                   [--dev-eui a84041000181c0de,a84041000181c0df] [--encoding json|protobuf]
 *                   (ChirpStack's HTTP integration posting up events to a running cloud; the token
 *                   and URL are what POST /v1/integrations {kind: "chirpstack"} answered)
 *
 * Common: --interval SECONDS (default 10).
 */
const USAGE = `usage: npm run emulate -- shelly-ht-gen1|shelly-plus-ht|serial|chirpstack|chirpstack-webhook [options] (see hardware/emulate.ts)`;

/**
 * Runs `tick` now and every `intervalMs` (a failure is said, not fatal); the answer stops the
 * ticks, then the emulator.
 */
function every(
  intervalMs: number,
  tick: () => Promise<unknown>,
  say: (line: string) => unknown,
  stopEmulator: () => Promise<void>,
): () => Promise<void> {
  const run = () => void tick().catch((err: unknown) => say(String(err)));
  const timer = setInterval(run, intervalMs);
  run();
  return async () => {
    clearInterval(timer);
    await stopEmulator();
  };
}

async function main(): Promise<void> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      broker: { type: 'string' },
      serve: { type: 'string' },
      id: { type: 'string' },
      link: { type: 'string' },
      format: { type: 'string', default: 'kv' },
      'dev-eui': { type: 'string', default: 'a84041000181c0de' },
      encoding: { type: 'string', default: 'json' },
      interval: { type: 'string', default: '10' },
      token: { type: 'string' },
    },
  });
  const intervalMs = Number(values.interval) * 1000;
  const say = (line: string) => process.stdout.write(`${new Date().toISOString()} ${line}\n`);
  let stop: () => Promise<void> | void;
  switch (positionals[0]) {
    case 'shelly-ht-gen1': {
      const e = new ShellyHtGen1Emulator({
        url: values.url ?? 'http://127.0.0.1:8081/',
        id: values.id ?? 'shellyht-EE45E9',
        intervalMs,
        onSent: (query, status) => say(`GET ?${query} -> ${status || 'unreachable'}`),
      });
      e.start();
      stop = () => e.stop();
      break;
    }
    case 'shelly-plus-ht': {
      const e = new ShellyPlusHtEmulator({
        brokerUrl: values.broker ?? 'mqtt://127.0.0.1:1883',
        id: values.id ?? 'shellyplusht-08b61fcb7f3c',
        intervalMs,
      });
      await e.connect();
      say(
        `connected to ${values.broker ?? 'mqtt://127.0.0.1:1883'} as ${e.id}, reporting every ${values.interval} s`,
      );
      e.start();
      stop = () => e.disconnect();
      break;
    }
    case 'serial': {
      const link = path.resolve(values.link ?? '/tmp/ttyEMU0');
      const e = new SerialSensorEmulator({
        sensorPath: `${link}.sensor`,
        gatewayPath: link,
        format: values.format === 'vaisala' ? 'vaisala' : 'kv',
        intervalMs,
      });
      await e.plug();
      say(`serial sensor on ${link} (format ${values.format}); the sensor writes to ${link}.sensor`);
      stop = every(
        intervalMs,
        async () => say(`line: ${await e.send()}`),
        say,
        () => e.stop(),
      );
      break;
    }
    case 'chirpstack': {
      const e = new ChirpstackEmulator({
        devEui: values['dev-eui'],
        encoding: values.encoding === 'protobuf' ? 'protobuf' : 'json',
        intervalMs,
      });
      const url = values.serve
        ? await e.serveBroker(Number(values.serve))
        : (values.broker ?? 'mqtt://127.0.0.1:1884');
      if (values.serve) say(`MQTT broker (standing in for ChirpStack's Mosquitto) on ${url}`);
      await e.connect(url);
      say(`publishing ${values.encoding} up events on ${e.topic}`);
      const tick = async () => {
        await e.uplink();
        say(`up event for ${values['dev-eui']}`);
      };
      stop = every(intervalMs, tick, say, () => e.stop());
      break;
    }
    case 'chirpstack-webhook': {
      if (!values.token) throw new Error('--token whk_... is required (POST /v1/integrations answers it)');
      const url = values.url ?? 'http://localhost:8080/v1/webhooks/chirpstack';
      const e = new ChirpstackWebhookEmulator({
        url,
        token: values.token,
        devEuis: values['dev-eui'].split(',').map((d) => d.trim().toLowerCase()),
        encoding: values.encoding === 'protobuf' ? 'protobuf' : 'json',
      });
      say(`posting ${values.encoding} up events to ${url}?event=up every ${values.interval} s`);
      const tick = async () => {
        for (const r of await e.round()) say(`up ${r.devEui} -> ${r.status} ${r.body}`);
      };
      stop = every(intervalMs, tick, say, async () => undefined);
      break;
    }
    default:
      process.stderr.write(`${USAGE}\n`);
      process.exit(2);
  }
  const shutdown = () => {
    void Promise.resolve(stop()).then(() => process.exit(0));
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

main().catch((err: unknown) => {
  process.stderr.write(`emulator failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
