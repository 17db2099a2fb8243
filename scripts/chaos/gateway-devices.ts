import net from 'node:net';
import path from 'node:path';
import { Aedes } from 'aedes';
import { ChirpstackEmulator } from '../../hardware/emulators/chirpstack.ts';
import { SerialSensorEmulator } from '../../hardware/emulators/serial-sensor.ts';
import { sleep } from './result.ts';
import { readingKey } from './types.ts';

/**
 * The serial and ChirpStack devices of the `gateway-kill` scenario, each sending steadily while the
 * gateway is killed, each with its own meaning of "accepted by the gateway" (docs/reliability.md,
 * "Chaos"). Both record every reading sent, and whether it was accepted, in the scenario's ledger.
 */

/** A reading's key and whether it was accepted, as the scenario's ledger keeps them. */
export type Ledger = Map<string, boolean>;

function record(ledger: Ledger, key: string, accepted: boolean): void {
  ledger.set(key, (ledger.get(key) ?? false) || accepted);
}

/** The last readings the gateway buffered, from its status page (`/status.json`, `recent`). */
async function recentReadings(
  statusUrl: string,
): Promise<{ device: string; measurements: { kind: string; value: number }[] }[] | null> {
  try {
    const response = await fetch(statusUrl, { signal: AbortSignal.timeout(2000) });
    if (response.status !== 200) return null;
    const body = (await response.json()) as {
      recent: { device: string; measurements: { kind: string; value: number }[] }[];
    };
    return body.recent;
  } catch {
    return null; // the gateway is dead or starting: asked again
  }
}

/** The gateway's buffer from its status page: rows waiting for the cloud, and publishes in flight. */
export async function gatewayBuffer(statusUrl: string): Promise<{ depth: number; inflight: number } | null> {
  try {
    const response = await fetch(statusUrl, { signal: AbortSignal.timeout(5000) });
    if (response.status !== 200) return null;
    const body = (await response.json()) as { buffer: { depth: number }; uplink: { inflight: number } };
    return { depth: body.buffer.depth, inflight: body.uplink.inflight };
  } catch {
    return null;
  }
}

/**
 * Line-based serial sensors (`kv` lines, `temperature=<v> humidity=50 ...`) on socat pseudo-terminal
 * pairs, one line every `intervalMs`. A serial line has no acknowledgement: the sensor writes it and
 * goes on. A line counts as accepted once the gateway shows it among the readings it has buffered:
 * its value, for its device, in the status page's `recent` list (`/status.json`), which the gateway
 * adds a reading to only after the buffer's commit (WAL, synchronous=FULL). The sender watches for
 * it for up to `watchMs` after writing the line; a line the gateway buffered but pushed out of that
 * list (the last 20 readings of all devices) before it was seen counts as not accepted, which is
 * never wrong: it may then be stored or not. A line written while the gateway is dead waits in the
 * pseudo-terminal and is read by the next process. Readings are told apart by value: the n-th line
 * of a device reports -40 + n/1000 °C.
 */
export class SerialDevices {
  readonly sensors: { localId: string; sensor: SerialSensorEmulator }[] = [];
  private stopping = false;
  private running: Promise<void>[] = [];
  /** Lines written, and of those, seen in the gateway's status page. */
  written = 0;
  confirmed = 0;

  constructor(
    private readonly options: {
      dir: string;
      count: number;
      ledger: Ledger;
      statusUrl: string;
      intervalMs: number;
      watchMs: number;
    },
  ) {
    for (let i = 0; i < options.count; i++) {
      const localId = `serial-${i}`;
      const sensor = new SerialSensorEmulator({
        sensorPath: path.join(options.dir, `sensor-end-${i}`),
        gatewayPath: path.join(options.dir, `ttyUSB${i}`),
        format: 'kv',
      });
      this.sensors.push({ localId, sensor });
    }
  }

  /** The `collectors.serial` section of the gateway's configuration. */
  config(): Record<string, unknown> {
    return {
      ports: this.sensors.map(({ localId, sensor }) => ({
        path: sensor.gatewayPath,
        device: localId,
        format: 'kv',
        reopen_min_ms: 50,
        reopen_max_ms: 200,
      })),
    };
  }

  /** Makes the pseudo-terminal pairs (before the gateway starts: it opens them by path). */
  async plug(): Promise<void> {
    for (const { sensor } of this.sensors) await sensor.plug();
  }

  start(): void {
    this.running = this.sensors.map(({ localId, sensor }) => this.send(localId, sensor));
  }

  private async send(localId: string, sensor: SerialSensorEmulator): Promise<void> {
    const { ledger, statusUrl, intervalMs, watchMs } = this.options;
    for (let n = 1; !this.stopping; n++) {
      const value = Number((-40 + n / 1000).toFixed(3));
      const key = readingKey(localId, 'temperature', value);
      await sensor.send({ temperature: value, humidity: 50 });
      this.written++;
      record(ledger, key, false);
      const deadline = performance.now() + watchMs;
      while (performance.now() < deadline) {
        const recent = await recentReadings(statusUrl);
        const seen = recent?.some(
          (r) =>
            r.device === localId && r.measurements.some((m) => m.kind === 'temperature' && m.value === value),
        );
        if (seen) {
          record(ledger, key, true);
          this.confirmed++;
          break;
        }
        await sleep(20);
      }
      await sleep(intervalMs);
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.running);
    for (const { sensor } of this.sensors) await sensor.stop();
  }
}

/**
 * LoRaWAN devices behind ChirpStack: ChirpStack's MQTT integration publishing `up` events (JSON,
 * with the decoded `object`, QoS 1) to a broker of the scenario's own (Aedes on a free port, in
 * place of ChirpStack's Mosquitto), one every `intervalMs` per device. The broker's PUBACK to the
 * publisher says only that the broker has it; the gateway subscribes with a persistent session at
 * QoS 1 and sends its own PUBACK for a delivery only once the reading is buffered (it withholds it
 * otherwise, and the broker delivers again after the reconnect). So an uplink counts as accepted
 * when the broker receives the gateway's PUBACK for a delivery of it (Aedes' `ack` event for the
 * gateway's client id). An uplink the broker took while the gateway was dead is queued in the
 * gateway's session and delivered after the restart. Uplinks are told apart by their time (the
 * network server's receive time, which becomes the reading's time): one millisecond apart, an hour
 * ago.
 */
export class ChirpstackDevices {
  private broker: Aedes | null = null;
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  private readonly emulators: { devEui: string; emulator: ChirpstackEmulator }[] = [];
  private stopping = false;
  private running: Promise<void>[] = [];
  url = '';
  /** Uplinks the broker took (its PUBACK to the publisher), and the gateway's PUBACKs. */
  published = 0;
  gatewayAcks = 0;
  private readonly baseMs = Date.now() - 3600_000;
  private readonly applicationId = '00000000-0000-4000-8000-00000000c4a0';

  constructor(
    private readonly options: {
      count: number;
      ledger: Ledger;
      /** The gateway's client id at the broker (its persistent session). */
      gatewayClientId: string;
      intervalMs: number;
    },
  ) {
    for (let i = 0; i < options.count; i++) {
      const devEui = `a84041000000c${i.toString(16).padStart(3, '0')}`;
      this.emulators.push({
        devEui,
        emulator: new ChirpstackEmulator({ devEui, applicationId: this.applicationId, encoding: 'json' }),
      });
    }
  }

  /** The `collectors.chirpstack` section of the gateway's configuration. */
  config(): Record<string, unknown> {
    return {
      url: this.url,
      application_id: this.applicationId,
      client_id: this.options.gatewayClientId,
      encoding: 'json',
      reconnect_min_ms: 50,
      reconnect_max_ms: 400,
    };
  }

  /** Starts the broker and connects the publishers. */
  async serve(): Promise<void> {
    const broker = await Aedes.createBroker();
    broker.on('ack', (packet, client) => {
      if (!packet || client?.id !== this.options.gatewayClientId || !('payload' in packet)) return;
      const event = JSON.parse(packet.payload.toString()) as {
        time: string;
        deviceInfo: { devEui: string };
      };
      this.gatewayAcks++;
      record(this.options.ledger, this.keyOf(event.deviceInfo.devEui, Date.parse(event.time)), true);
    });
    const server = net.createServer((socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      broker.handle(socket);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    this.broker = broker;
    this.server = server;
    this.url = `mqtt://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    for (const { emulator } of this.emulators) await emulator.connect(this.url);
  }

  private keyOf(devEui: string, ms: number): string {
    return readingKey(devEui, 'temperature', ms * 1000);
  }

  start(): void {
    this.running = this.emulators.map(({ devEui, emulator }) => this.send(devEui, emulator));
  }

  private async send(devEui: string, emulator: ChirpstackEmulator): Promise<void> {
    for (let n = 1; !this.stopping; n++) {
      const time = this.baseMs + n;
      // Recorded before the publish: the gateway's PUBACK may come before the broker's.
      record(this.options.ledger, this.keyOf(devEui, time), false);
      await emulator.uplink({ time, temperature: -20 + (n % 40), humidity: 50, fCnt: n });
      this.published++;
      await sleep(this.options.intervalMs);
    }
  }

  /** Stops publishing; the broker stays up for the gateway to drain its session. */
  async stopSending(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.running);
  }

  async stop(): Promise<void> {
    await this.stopSending();
    for (const { emulator } of this.emulators) await emulator.stop();
    const { broker, server } = this;
    this.broker = null;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
    if (broker) await new Promise<void>((resolve) => broker.close(() => resolve()));
  }
}
