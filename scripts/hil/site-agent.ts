import path from 'node:path';
import { parseArgs } from 'node:util';
import { ChirpstackEmulator } from '../../hardware/emulators/chirpstack.ts';
import { SerialSensorEmulator } from '../../hardware/emulators/serial-sensor.ts';
import { ShellyHtGen1Emulator } from '../../hardware/emulators/shelly-ht-gen1.ts';
import { ShellyPlusHtEmulator } from '../../hardware/emulators/shelly-plus-ht.ts';
import { serveAgent } from './agent.ts';
import { SITE_DEVICES, type LedgerEntry } from './ledger.ts';

/**
 * The emulated site, run by the rig inside the site's namespace: one of each emulator
 * (hardware/emulators) talking to the gateway over the LAN link, each keeping a ledger of what it
 * sent and whether it was told "accepted" (ledger.ts). The ChirpStack emulator serves the network
 * server's MQTT broker on this namespace's LAN address; the serial sensor is a socat
 * pseudo-terminal pair whose gateway end the gateway opens (a file path, seen from every namespace).
 *
 * Commands: start {intervalMs}, stop, ledger, status (the gateway's /status.json over the LAN),
 * page (the status page's HTML).
 */

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      gateway: { type: 'string' },
      listen: { type: 'string' },
      dir: { type: 'string' },
    },
  });
  const gatewayHost = values.gateway!;
  const chirpstack = new ChirpstackEmulator({ devEui: SITE_DEVICES.chirpstack, encoding: 'json' });
  const brokerUrl = await chirpstack.serveBroker(1884, values.listen);
  await chirpstack.connect(brokerUrl);
  const serial = new SerialSensorEmulator({
    sensorPath: path.join(values.dir!, 'serial-sensor-end'),
    gatewayPath: path.join(values.dir!, 'ttyUSB0'),
  });
  await serial.plug();
  const gen1 = new ShellyHtGen1Emulator({ url: `http://${gatewayHost}:8081/`, id: SITE_DEVICES.gen1 });
  const plus = new ShellyPlusHtEmulator({
    brokerUrl: `mqtt://${gatewayHost}:1883`,
    id: SITE_DEVICES.plus,
    statusTopics: false,
  });

  const ledger: LedgerEntry[] = [];
  const pending = new Set<Promise<void>>();
  const timers: NodeJS.Timeout[] = [];
  /** Records one reading; `send` resolves true when the source was told "accepted". */
  const track = (entry: Omit<LedgerEntry, 'accepted'>, send: () => Promise<boolean>) => {
    const p = send()
      .catch(() => false)
      .then((accepted) => void ledger.push({ ...entry, accepted }))
      .finally(() => pending.delete(p));
    pending.add(p);
  };
  let n = 0;
  const round = () => {
    const i = n++;
    // Values that differ from reading to reading, within every sensor's range.
    const t = Math.round((5 + (i % 1000) * 0.01) * 100) / 100;
    const now = Date.now();
    track(
      {
        source: 'shelly-gen1',
        device: SITE_DEVICES.gen1,
        kind: 'temperature',
        label: null,
        value: t,
        ts: null,
      },
      async () => (await gen1.report({ temperature: t, humidity: 50 })) === 200,
    );
    const plusTs = Math.round(now / 10) * 10;
    track(
      {
        source: 'shelly-plus',
        device: SITE_DEVICES.plus,
        kind: 'temperature',
        label: null,
        value: t,
        ts: plusTs,
      },
      async () => {
        await plus.report({ temperature: t, humidity: 50, battery: 90, ts: plusTs / 1000 });
        return true;
      },
    );
    track(
      { source: 'serial', device: SITE_DEVICES.serial, kind: 'temperature', label: null, value: t, ts: now },
      async () => {
        await serial.send({ temperature: t, humidity: 50, battery: 90, extra: `ts=${now}` });
        return true;
      },
    );
    // ChirpStack's LPP codec gives tenths; the channel number becomes the label.
    const c = Math.round((-20 + (i % 300) * 0.1) * 10) / 10;
    track(
      {
        source: 'chirpstack',
        device: SITE_DEVICES.chirpstack,
        kind: 'temperature',
        label: '1',
        value: c,
        ts: now,
      },
      async () => {
        await chirpstack.uplink({ temperature: c, humidity: 50, time: now });
        return true;
      },
    );
  };

  const fetchText = async (p: string) => {
    const res = await fetch(`http://${gatewayHost}:8080${p}`, { signal: AbortSignal.timeout(10_000) });
    if (!res.ok) throw new Error(`GET ${p}: ${res.status}`);
    return res.text();
  };

  serveAgent(
    { brokerUrl, serialPath: serial.gatewayPath },
    {
      start: async (args) => {
        await plus.connect();
        const intervalMs = Number(args.intervalMs ?? 1000);
        round();
        timers.push(setInterval(round, intervalMs));
        return { started: true };
      },
      stop: async () => {
        for (const t of timers.splice(0)) clearInterval(t);
        // Every reading in flight settles: acknowledged, refused or timed out.
        const deadline = Date.now() + 60_000;
        while (pending.size && Date.now() < deadline)
          await Promise.race([...pending, new Promise((r) => setTimeout(r, 1000))]);
        return { sent: ledger.length, unsettled: pending.size };
      },
      ledger: async () => ledger,
      status: async () => JSON.parse(await fetchText('/status.json')) as unknown,
      page: async () => fetchText('/'),
    },
    async () => {
      for (const t of timers.splice(0)) clearInterval(t);
      await plus.disconnect().catch(() => undefined);
      await serial.stop().catch(() => undefined);
      await chirpstack.stop().catch(() => undefined);
    },
  );
}

main().catch((err: unknown) => {
  process.stderr.write(
    `site agent failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
