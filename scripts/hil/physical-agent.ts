import { connect, type MqttClient } from 'mqtt';
import { parseArgs } from 'node:util';
import { SerialPort } from 'serialport';
import { serveAgent } from './agent.ts';
import type { LedgerEntry } from './ledger.ts';
import { readPhysicalConfig } from './physical-config.ts';

/**
 * The physical rig's observer, run inside the gateway's namespace (where the rig's LAN interface
 * is): it records what the real devices send, as the emulators' ledgers do (ledger.ts).
 * - Shelly Plus: subscribes to `<id>/events/rpc` on the gateway's own broker and records each
 *   NotifyStatus with a temperature (its own time, its value).
 * - ChirpStack: subscribes to the listed devices' `up` events on the network server's broker
 *   (JSON integration) and records each event's time (the value is the device codec's: not checked).
 * - Serial ports with a `writer`: writes a `temperature=.. ts=..` line to the writer every
 *   `serial_interval_s` and records it once written.
 * A Shelly Gen1 sends no time and cannot be observed on the wire here: physical.ts checks it by
 * count against the gateway's own counter.
 *
 * Commands: start, stop, ledger, status (the gateway's /status.json on 127.0.0.1:8080).
 */
async function main(): Promise<void> {
  const { values } = parseArgs({ options: { config: { type: 'string' } } });
  const config = readPhysicalConfig(values.config!);
  const ledger: LedgerEntry[] = [];
  const clients: MqttClient[] = [];
  const writers: SerialPort[] = [];
  const timers: NodeJS.Timeout[] = [];
  let recording = false;

  if (config.shelly_plus.length) {
    const ids = new Set(config.shelly_plus.map((d) => d.id));
    const client = connect('mqtt://127.0.0.1:1883', { clientId: 'hil-observer', reconnectPeriod: 1000 });
    client.on('error', () => undefined);
    client.on('connect', () => {
      for (const id of ids) client.subscribe(`${id}/events/rpc`, { qos: 1 });
    });
    client.on('message', (topic, payload) => {
      const id = topic.split('/')[0]!;
      if (!recording || !ids.has(id)) return;
      try {
        const frame = JSON.parse(payload.toString()) as {
          method?: string;
          params?: { ts?: number; 'temperature:0'?: { tC?: number } };
        };
        const tC = frame.params?.['temperature:0']?.tC;
        const ts = frame.params?.ts;
        if (frame.method !== 'NotifyStatus' || typeof tC !== 'number' || typeof ts !== 'number') return;
        ledger.push({
          source: 'shelly-plus',
          device: id,
          kind: 'temperature',
          label: null,
          value: tC,
          ts: Math.round(ts * 1000),
          accepted: true,
        });
      } catch {
        // not a frame the gateway would take either
      }
    });
    clients.push(client);
  }
  const cs = config.chirpstack;
  if (cs) {
    const client = connect(cs.url, {
      clientId: `hil-observer-${process.pid}`,
      reconnectPeriod: 1000,
      ...(cs.username ? { username: cs.username, password: cs.password } : {}),
    });
    client.on('error', () => undefined);
    client.on('connect', () => {
      for (const d of cs.devices)
        client.subscribe(`application/${cs.application_id}/device/${d.dev_eui}/event/up`, { qos: 1 });
    });
    client.on('message', (topic, payload) => {
      const device = cs.devices.find((d) => topic.includes(`/device/${d.dev_eui}/`));
      if (!recording || !device) return;
      try {
        const event = JSON.parse(payload.toString()) as { time?: string };
        if (!event.time) return;
        ledger.push({
          source: 'chirpstack',
          device: device.dev_eui,
          kind: device.kind,
          label: device.label,
          value: null,
          ts: Date.parse(event.time),
          accepted: true,
        });
      } catch {
        // a protobuf integration: set ChirpStack's MQTT integration to JSON for the rig
      }
    });
    clients.push(client);
  }
  for (const s of config.serial) {
    if (!s.writer) continue;
    const port = new SerialPort({ path: s.writer, baudRate: s.baud_rate });
    port.on('error', () => undefined);
    writers.push(port);
    let i = 0;
    const write = () => {
      const ts = Date.now();
      const value = Math.round((5 + (i++ % 1000) * 0.01) * 100) / 100;
      const line =
        s.format === 'vaisala'
          ? `RH= 50.0 %RH T= ${value.toFixed(2)} 'C`
          : `temperature=${value} humidity=50 ts=${ts}`;
      port.write(`${line}\r\n`, (err) => {
        // A Vaisala line has no time: the gateway stamps it on receipt, so it is matched by value.
        if (!err)
          ledger.push({
            source: 'serial',
            device: s.device,
            kind: 'temperature',
            label: null,
            value,
            ts: s.format === 'vaisala' ? null : ts,
            accepted: true,
          });
      });
    };
    timers.push(setInterval(() => recording && write(), config.timeline.serial_interval_s * 1000));
  }

  serveAgent(
    { observing: clients.length + writers.length },
    {
      start: async () => {
        recording = true;
        return { recording };
      },
      stop: async () => {
        recording = false;
        return { sent: ledger.length, unsettled: 0 };
      },
      ledger: async () => ledger,
      status: async () => {
        const res = await fetch('http://127.0.0.1:8080/status.json', { signal: AbortSignal.timeout(10_000) });
        if (!res.ok) throw new Error(`GET /status.json: ${res.status}`);
        return await res.json();
      },
      page: async () => (await fetch('http://127.0.0.1:8080/')).text(),
    },
    async () => {
      for (const t of timers) clearInterval(t);
      await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
      for (const w of writers) if (w.isOpen) w.close();
    },
  );
}

main().catch((err: unknown) => {
  process.stderr.write(
    `physical observer failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
