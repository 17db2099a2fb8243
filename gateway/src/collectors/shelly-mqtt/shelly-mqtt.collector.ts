import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { timingSafeEqual } from 'node:crypto';
import { Aedes, type Client as AedesClient, type PublishPacket } from 'aedes';
import { IngestValidationError } from '../../../../shared/ingest.ts';
import type { CheckResult, Collector, CollectorDeps, IdentifyResult } from '../../collector.ts';
import type { ShellyMqttConfig } from '../../config.ts';
import { ReadingRefused } from '../../reading.ts';
import { checkListen } from '../listen-check.ts';
import { parseShellyMessage, ShellyPayloadError, shellyModel, type ShellyMessage } from './messages.ts';

/** How long after a device's last NotifyStatus its plain status topics are still taken as duplicates. */
export const RPC_FRESH_MS = 60 * 60 * 1000;

/** Custom topic prefixes the collector keeps at most (a site has tens of devices, not thousands). */
const MAX_PREFIXES = 1000;

/** The source name the gateway uses for its RPC requests; answers come back on `<this>/rpc`. */
export const RPC_SOURCE = 'sensor-gateway';

/**
 * Shelly MQTT: an aedes broker on the gateway (port 1883 by default) that second- and
 * third-generation Shelly devices publish to (set the device's MQTT server to the gateway).
 *
 * A publish is judged inside aedes' `authorizePublish`, before the broker acknowledges it: a reading
 * is PUBACKed only once it is durably buffered. When the buffer refuses it, the hook fails, which
 * aedes answers with PUBACK 0x87 (MQTT 5) or by closing the connection (3.1.1, what Shelly speaks),
 * so the device keeps the message. Malformed payloads are counted and acknowledged (they will never
 * become valid). The device's last-will on `<prefix>/online` (`false`) becomes the spec's `offline`
 * message upstream; `true` becomes `online`, and the gateway then asks the device for its model and
 * firmware (`Shelly.GetDeviceInfo` over MQTT RPC) and forwards them as the device's info.
 */
export class ShellyMqttCollector implements Collector {
  readonly name = 'shelly-mqtt';
  private broker: Aedes | null = null;
  private server: net.Server | null = null;
  private readonly seen = new Set<string>();
  /**
   * Devices that send NotifyStatus (with their own time) → when the last one came (monotonic ms):
   * their plain status topics carry the same values without a time and are skipped, for as long as
   * the notifications keep coming (a device whose RPC notifications are turned off is heard again
   * through its status topics RPC_FRESH_MS after its last one).
   */
  private readonly rpcDevices = new Map<string, number>();
  /**
   * A custom topic prefix → the device (`src`) its NotifyStatus names: its plain status topics and
   * `online` are that device's, not a second device named after the prefix. Kept in the collector's
   * memory, so a restart of the gateway does not make the prefix a device of its own again.
   */
  private readonly prefixes = new Map<string, string>();
  private rpcId = 0;

  constructor(
    private readonly deps: CollectorDeps & { config: ShellyMqttConfig },
    private readonly monotonicMs: () => number = () => performance.now(),
  ) {}

  get port(): number {
    return (this.server?.address() as AddressInfo | null)?.port ?? 0;
  }

  async start(_signal: AbortSignal): Promise<void> {
    if (this.broker) return;
    const { config, log, memory } = this.deps;
    for (const [prefix, device] of memory.recall()) this.prefixes.set(prefix, device);
    const broker = await Aedes.createBroker({
      authenticate: (_client, username, password, done) => {
        if (config.username === undefined) return done(null, true);
        const ok = username === config.username && password !== undefined && same(password, config.password!);
        if (ok) return done(null, true);
        const err = Object.assign(new Error('bad user name or password'), { returnCode: 4 as const });
        done(err, false);
      },
      authorizePublish: (client, packet, callback) => this.onPublish(client, packet, callback),
    });
    broker.on('clientError', (client, err) =>
      log.debug({ client: client.id, err: err.message }, 'device connection error'),
    );
    broker.on('client', (client) => log.debug({ client: client.id }, 'device connected'));
    const server = net.createServer((socket) => broker.handle(socket));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', (err) => {
      this.deps.counters.errors++;
      log.error({ err }, 'broker listener error');
    });
    this.broker = broker;
    this.server = server;
    this.deps.counters.state = 'listening';
    log.info({ host: config.host, port: this.port }, 'local MQTT broker listening for Shelly devices');
  }

  private onPublish(
    client: AedesClient | null,
    packet: PublishPacket,
    callback: (error?: Error | null) => void,
  ): void {
    // Our own publishes (RPC requests) come without a client and are not readings.
    if (!client) return callback(null);
    const { counters, log } = this.deps;
    counters.received++;
    let message: ShellyMessage;
    try {
      message = parseShellyMessage(packet.topic, Buffer.from(packet.payload), RPC_SOURCE);
    } catch (err) {
      if (!(err instanceof ShellyPayloadError || err instanceof IngestValidationError)) throw err;
      counters.invalid++;
      log.info({ topic: packet.topic, reason: err.message }, 'Shelly message ignored: invalid');
      return callback(null);
    }
    this.handle(message).then(
      () => callback(null),
      (err: unknown) => {
        if (err instanceof ReadingRefused && err.code === 'invalid') {
          counters.invalid++;
          log.info({ topic: packet.topic, reason: err.message }, 'Shelly message ignored: invalid');
          return callback(null);
        }
        counters.refused++;
        log.warn(
          { topic: packet.topic, err: err instanceof Error ? err.message : String(err) },
          'Shelly reading not accepted',
        );
        callback(err instanceof Error ? err : new Error(String(err)));
      },
    );
  }

  private async handle(message: ShellyMessage): Promise<void> {
    const { sink, clock, counters, log } = this.deps;
    switch (message.kind) {
      case 'reading': {
        let device = message.device;
        if (message.viaRpc) {
          this.rpcDevices.set(device, this.monotonicMs());
          if (message.prefix !== device) this.learnPrefix(message.prefix, device);
        } else {
          device = this.prefixes.get(message.prefix) ?? device;
          const lastRpc = this.rpcDevices.get(device);
          if (lastRpc !== undefined && this.monotonicMs() - lastRpc < RPC_FRESH_MS) return; // the same value came with the device's time
        }
        const first = !this.seen.has(device);
        // On first sight the model goes first (same commit), so the cloud creates the device with it.
        await Promise.all([
          first ? sink.deviceInfo({ device, model: shellyModel(device) }) : null,
          sink.accept({ device, ts: message.ts, measurements: message.measurements }),
        ]);
        counters.accepted++;
        if (first) {
          this.seen.add(device);
          this.requestDeviceInfo(message.prefix);
        }
        return;
      }
      case 'online': {
        const device = this.prefixes.get(message.device) ?? message.device;
        const first = !this.seen.has(device);
        await Promise.all([
          first ? sink.deviceInfo({ device, model: shellyModel(device) }) : null,
          sink.deviceState({
            device,
            status: message.online ? 'online' : 'offline',
            at: clock.nowMicros(),
            ...(message.online ? {} : { reason: 'device last-will' }),
          }),
        ]);
        if (message.online) {
          this.seen.add(device);
          this.requestDeviceInfo(message.device); // asked where it listens: under its prefix
        }
        return;
      }
      case 'rpc-response': {
        const { result } = message;
        const version = typeof result.ver === 'string' ? result.ver : undefined;
        await sink.deviceInfo({
          device: message.device,
          model: shellyModel(message.device, result.app),
          fw_version: version,
        });
        return;
      }
      case 'ignored':
        log.trace({ why: message.why }, 'Shelly message without reading');
    }
  }

  /** Notes (and keeps across restarts) that `prefix`'s topics are `device`'s; bounded by MAX_PREFIXES. */
  private learnPrefix(prefix: string, device: string): void {
    if (this.prefixes.get(prefix) === device) return;
    if (!this.prefixes.has(prefix) && this.prefixes.size >= MAX_PREFIXES) {
      this.deps.log.warn({ prefix, device, max: MAX_PREFIXES }, 'too many Shelly topic prefixes: not kept');
      return;
    }
    this.prefixes.set(prefix, device);
    this.deps.memory.remember(prefix, device);
  }

  /** Asks a device for its model and firmware; the answer arrives on `<RPC_SOURCE>/rpc`. */
  private requestDeviceInfo(device: string): void {
    const broker = this.broker;
    if (!broker) return;
    const payload = JSON.stringify({ id: ++this.rpcId, src: RPC_SOURCE, method: 'Shelly.GetDeviceInfo' });
    broker.publish(
      {
        cmd: 'publish',
        topic: `${device}/rpc`,
        payload: Buffer.from(payload),
        qos: 1,
        retain: false,
        dup: false,
      },
      (err) => {
        if (err) this.deps.log.warn({ device, err: err.message }, 'could not ask the device for its info');
      },
    );
  }

  owns(device: string): boolean {
    return this.seen.has(device);
  }

  /**
   * The H&T sensors sleep between reports and have no indicator to drive; Gen2+ RPC has no identify
   * method, so the downlink is reported as unsupported.
   */
  async identify(_device: string): Promise<IdentifyResult> {
    return 'unsupported';
  }

  async check(_signal: AbortSignal): Promise<CheckResult> {
    const { host, port, username } = this.deps.config;
    const auth = username ? 'with user name and password' : 'without authentication';
    return checkListen(host, port, `Shelly MQTT devices (${auth})`);
  }

  async stop(): Promise<void> {
    const { broker, server } = this;
    this.broker = null;
    this.server = null;
    if (!broker || !server) return;
    this.deps.counters.state = 'stopped';
    await new Promise<void>((resolve) => broker.close(() => resolve()));
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

function same(given: Buffer, expected: string): boolean {
  const b = Buffer.from(expected);
  return given.length === b.length && timingSafeEqual(given, b);
}
