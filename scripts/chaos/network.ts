import fs from 'node:fs';
import { connectAsync, type MqttClient } from 'mqtt';
import type { StatusSnapshot } from '../../gateway/src/status.ts';
import { formatMicros, parseTimestampMicros } from '../../shared/time.ts';
import { writeGatewayConfig } from '../../test/gateway/helpers/gateway.ts';
import { spawnGateway, type GatewayProcess } from '../../test/gateway/helpers/process.ts';
import { tempDir } from '../../test/helpers/databases.ts';
import { HttpClient } from '../../test/helpers/http.ts';
import { check } from './checker.ts';
import { FaultProxy, type ProxyMode } from './fault-proxy.ts';
import {
  freePort,
  killCloud,
  prepareInstallation,
  startCloud,
  stopCloud,
  storedKeys,
  type CloudRun,
  type Installation,
} from './installation.ts';
import { random, sleep } from './result.ts';
import { readingKey, type Scenario, type ScenarioOptions, type ScenarioResult } from './types.ts';

/**
 * Scenario 4 of docs/reliability.md, "Chaos": the network between the gateway and the cloud. The
 * gateway (`gateway/src/main.ts`, as `npm run gateway` starts it) reaches the cloud's MQTT bridge
 * only through a fault-injecting TCP proxy (`fault-proxy.ts`; its mutual TLS passes through
 * untouched) that cuts, blackholes or slows the path.
 *
 * The devices are Shelly Plus H&T as the gateway's local MQTT broker (the `shelly_mqtt` collector)
 * sees them: `NotifyStatus` frames carrying the device's own time (`params.ts`) and its temperature,
 * the only component that changed (the firmware's NotifyStatus carries changed components only). A
 * device is told "accepted" by the broker's PUBACK, which the gateway sends once the reading is
 * durably in its buffer. Because the reading carries its own time, the gateway keeps it (it stamps
 * only readings without one), so readings are told apart by (device, time) and a backlog can hold
 * readings really taken days ago, with no change to the gateway's clock.
 */

/** A Shelly Plus H&T on the gateway's local broker (MQTT 3.1.1, QoS 1, as the firmware). */
class NotifyingDevice {
  private constructor(
    readonly id: string,
    private readonly client: MqttClient,
  ) {}

  static async connect(port: number, id: string): Promise<NotifyingDevice> {
    const client = await connectAsync(`mqtt://127.0.0.1:${port}`, {
      clientId: id,
      protocolVersion: 4,
      clean: true,
      reconnectPeriod: 500,
    });
    client.on('error', () => undefined); // it reconnects by itself, as the device does
    return new NotifyingDevice(id, client);
  }

  /** The key of a reading taken at `tsSeconds`, as the gateway turns the device's time into µs. */
  key(tsSeconds: number): string {
    return readingKey(this.id, 'temperature', Math.round(tsSeconds * 1e6));
  }

  /** Publishes one reading; true once the gateway acknowledged it (PUBACK), false otherwise. */
  async notify(tsSeconds: number, temperature: number): Promise<boolean> {
    const params = { ts: tsSeconds, 'temperature:0': { id: 0, tC: temperature } };
    const frame = JSON.stringify({ src: this.id, dst: `${this.id}/events`, method: 'NotifyStatus', params });
    try {
      await this.client.publishAsync(`${this.id}/events/rpc`, frame, { qos: 1 });
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    await this.client.endAsync(true);
  }
}

interface UplinkSettings {
  keepalive_s: number;
  reconnect_min_ms: number;
  reconnect_max_ms: number;
  connect_timeout_ms: number;
  inflight: number;
}

/**
 * The full forms run the gateway's uplink with its production defaults (gateway/src/config.ts), so
 * that detection and recovery times are those of a real installation; the short forms with the
 * smallest keepalive and short backoffs, so that a few seconds of fault are noticed and recovered.
 */
function uplinkSettings(full: boolean): UplinkSettings {
  return full
    ? {
        keepalive_s: 30,
        reconnect_min_ms: 1000,
        reconnect_max_ms: 60_000,
        connect_timeout_ms: 10_000,
        inflight: 100,
      }
    : {
        keepalive_s: 5,
        reconnect_min_ms: 100,
        reconnect_max_ms: 1000,
        connect_timeout_ms: 3000,
        inflight: 100,
      };
}

/** The cloud, the proxy in front of its bridge, the gateway behind the proxy, and the devices. */
interface Rig {
  inst: Installation;
  cloud: CloudRun;
  proxy: FaultProxy;
  gateway: GatewayProcess;
  devices: NotifyingDevice[];
  status(): Promise<StatusSnapshot>;
}

async function withRig<T>(
  options: ScenarioOptions,
  setup: { sensors: number; uplink: UplinkSettings; proxy: ProxyMode },
  body: (rig: Rig) => Promise<T>,
): Promise<T> {
  const inst = await prepareInstallation({ db: options.db, httpDevices: 0 });
  const dir = tempDir('sm-chaos-net-');
  let cloud: CloudRun | null = null;
  let proxy: FaultProxy | null = null;
  let gateway: GatewayProcess | null = null;
  const devices: NotifyingDevice[] = [];
  try {
    proxy = new FaultProxy({ host: '127.0.0.1', port: inst.mqttPort });
    await proxy.start(setup.proxy);
    const brokerPort = await freePort();
    const proxied = `mqtts://127.0.0.1:${proxy.port}`;
    const configFile = writeGatewayConfig(dir, {
      bundle: (file) => fs.writeFileSync(file, JSON.stringify({ ...inst.bridge, mqtt_url: proxied })),
      collectors: { shelly_mqtt: { host: '127.0.0.1', port: brokerPort } },
      uplink: { ...setup.uplink },
      gatewayId: 'gw-chaos-net',
    });
    // The cloud and the gateway start side by side (each takes seconds of CPU to load); the
    // gateway's uplink retries until the cloud listens.
    const [started, spawned] = await Promise.allSettled([startCloud(inst), spawnGateway(configFile)]);
    if (started.status === 'fulfilled') cloud = started.value;
    if (spawned.status === 'fulfilled') gateway = spawned.value;
    if (started.status === 'rejected') throw started.reason;
    if (spawned.status === 'rejected') throw spawned.reason;
    const statusLine = spawned.value.logs.find((l) => l.msg === 'status page listening');
    if (!statusLine) throw new Error('the gateway logged no status page port');
    const statusUrl = `http://127.0.0.1:${statusLine.port as number}/status.json`;
    const ids = Array.from(
      { length: setup.sensors },
      (_, s) => `shellyplusht-${s.toString(16).padStart(12, '0')}`,
    );
    const connected = await Promise.allSettled(ids.map((id) => NotifyingDevice.connect(brokerPort, id)));
    for (const c of connected) if (c.status === 'fulfilled') devices.push(c.value);
    const failed = connected.find((c) => c.status === 'rejected');
    if (failed) throw failed.reason;
    const status = async () => {
      const response = await fetch(statusUrl);
      return (await response.json()) as StatusSnapshot;
    };
    return await body({ inst, cloud: started.value, proxy, gateway: spawned.value, devices, status });
  } finally {
    await Promise.all(devices.map((d) => d.close().catch(() => undefined)));
    if (gateway) await gateway.kill('SIGKILL');
    if (proxy) await proxy.stop();
    if (cloud) await killCloud(cloud);
    fs.rmSync(dir, { recursive: true, force: true });
    await inst.dispose();
  }
}

/** The gateway's status, sampled every 100 ms: what the uplink did, and when. */
interface Sample {
  at: number;
  state: string;
  published: number;
  connects: number;
  depth: number;
}

function monitor(rig: Rig): { samples: Sample[]; stop(): Promise<void> } {
  const samples: Sample[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        const s = await rig.status();
        samples.push({
          at: performance.now(),
          state: s.uplink.state,
          published: s.uplink.published,
          connects: s.uplink.connects,
          depth: s.buffer.depth,
        });
      } catch {
        // The status page of a busy gateway may answer late; the next sample will do.
      }
      await sleep(100);
    }
  })();
  return {
    samples,
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}

/** Waits (up to `ms`) until the gateway's buffer is empty; answers when it was, or null. */
async function drained(rig: Rig, ms: number): Promise<number | null> {
  const deadline = performance.now() + ms;
  while (performance.now() < deadline) {
    const s = await rig.status();
    if (s.buffer.depth === 0 && s.uplink.inflight === 0) return performance.now();
    await sleep(200);
  }
  return null;
}

function resultOf(
  name: string,
  options: ScenarioOptions,
  ledger: Map<string, boolean>,
  stored: string[],
  figures: { faults: number; startedAt: number; recoveryMs: number; notes: ScenarioResult['notes'] },
): ScenarioResult {
  const checked = check(
    [...ledger].map(([key, acknowledged]) => ({ key, acknowledged })),
    stored,
  );
  return {
    scenario: name,
    db: options.db,
    faults: figures.faults,
    durationMs: Math.round(performance.now() - figures.startedAt),
    sent: ledger.size,
    acknowledged: checked.acknowledged,
    stored: checked.stored,
    lost: checked.lost.length,
    duplicated: checked.duplicated.length,
    unexpected: checked.unexpected.length,
    http5xx: 0,
    recoveryMs: Math.round(figures.recoveryMs),
    examples: {
      lost: checked.lost.slice(0, 20),
      duplicated: checked.duplicated.slice(0, 20),
      unexpected: checked.unexpected.slice(0, 20),
    },
    notes: figures.notes,
  };
}

const SLOW: ProxyMode = { kind: 'slow', latencyMs: 300, bytesPerSecond: 20_000 };
const CYCLE: ProxyMode[] = [{ kind: 'cut' }, { kind: 'blackhole' }, SLOW];

/**
 * `network`: devices report steadily (each one reading every 100 ms) while the proxy cycles through
 * cut, blackhole and slow (300 ms, 20 KB/s) periods of `--duration` (two minutes each in the full
 * form, four seconds in the short one), with the path whole for a while between them; then the
 * path heals, the devices stop and the gateway's buffer drains. Every reading the gateway
 * acknowledged must be stored once. Recovery: from each heal until the gateway has a reading
 * PUBACKed by the cloud again; also noted, when a blackhole was noticed (the gateway's keepalive)
 * and when the buffer was back to its depth before the fault.
 */
export const network: Scenario = {
  name: 'network',
  description: 'the gateway–cloud path cut, blackholed and slowed by a proxy while devices report',
  databases: ['sqlite'],
  async run(options: ScenarioOptions): Promise<ScenarioResult> {
    const faults = options.faults ?? 3;
    const faultMs = options.durationMs ?? (options.full ? 120_000 : 2000);
    const upMs = options.full ? 20_000 : 1000;
    const sensors = options.full ? 20 : 5;
    const rand = random(options.seed);
    const startedAt = performance.now();
    return withRig(
      options,
      { sensors, uplink: uplinkSettings(options.full), proxy: { kind: 'pass' } },
      async (rig) => {
        const ledger = new Map<string, boolean>();
        let refused = 0;
        let stopping = false;
        const senders = rig.devices.map(async (device, d) => {
          let last = 0;
          for (let n = 0; !stopping; n++) {
            // Millisecond times, increasing per device: exact in µs after the gateway's rounding.
            const ts = Math.max(Date.now(), last + 1);
            last = ts;
            const key = device.key(ts / 1000);
            const ok = await device.notify(ts / 1000, 20 + ((n + d) % 100) / 10);
            ledger.set(key, (ledger.get(key) ?? false) || ok);
            if (!ok) refused++;
            await sleep(100);
          }
        });
        const mon = monitor(rig);
        const lines: string[] = [];
        const recoveries: number[] = [];
        try {
          // The path works first: the gateway connects and forwards.
          await waitFor(() => (mon.samples.at(-1)?.published ?? 0) > 0, 60_000, 'the first PUBACK');
          for (let i = 0; i < faults; i++) {
            await sleep(upMs * (0.5 + rand()));
            const mode = CYCLE[i % CYCLE.length]!;
            const before = mon.samples.at(-1)!;
            const faultAt = performance.now();
            await rig.proxy.setMode(mode);
            options.log(`network fault ${i + 1}/${faults}: ${mode.kind} for ${faultMs} ms`);
            await sleep(faultMs);
            const healedAt = performance.now();
            const atHeal = mon.samples.at(-1)!;
            await rig.proxy.setMode({ kind: 'pass' });
            await waitFor(
              () => mon.samples.some((s) => s.at > healedAt && s.published > atHeal.published),
              300_000,
              `a PUBACK after the ${mode.kind} healed`,
            );
            const back = mon.samples.find((s) => s.at > healedAt && s.published > atHeal.published)!;
            recoveries.push(back.at - healedAt);
            await waitFor(
              () => mon.samples.some((s) => s.at > healedAt && s.depth <= before.depth + 20),
              600_000,
              `the buffer back to its depth after the ${mode.kind}`,
            );
            const caughtUp = mon.samples.find((s) => s.at > healedAt && s.depth <= before.depth + 20)!;
            const noticed = mon.samples.find((s) => s.at > faultAt && s.state !== 'connected');
            const parts = [
              `${mode.kind} ${i + 1}`,
              `buffer ${atHeal.depth} at the heal`,
              `PUBACK again after ${seconds(back.at - healedAt)}`,
              `caught up after ${seconds(caughtUp.at - healedAt)}`,
            ];
            if (mode.kind === 'blackhole')
              parts.push(noticed ? `gateway noticed after ${seconds(noticed.at - faultAt)}` : 'not noticed');
            lines.push(parts.join(', '));
            options.log(lines.at(-1)!);
          }
        } finally {
          stopping = true;
          await Promise.all(senders);
        }
        const drainedAt = await drained(rig, 300_000);
        await mon.stop();
        const ids = new Set(rig.devices.map((d) => d.id));
        const stored = (await storedKeys(rig.inst)).filter((k) => ids.has(k.split('/')[0]!));
        const notes: ScenarioResult['notes'] = {
          devices: sensors,
          'fault length ms': faultMs,
          'uplink keepalive s': uplinkSettings(options.full).keepalive_s,
          'proxy connections': rig.proxy.counts.connections,
          'proxy resets': rig.proxy.counts.resets,
          'uplink connects': mon.samples.at(-1)?.connects ?? 0,
          'cloud error log lines': rig.cloud.errors.count,
        };
        lines.forEach((line, i) => (notes[`fault ${i + 1}`] = line));
        if (refused > 0) notes.refused = refused;
        if (drainedAt === null) notes.failed = 'the gateway buffer did not drain within 5 minutes';
        const code = await stopCloud(rig.cloud);
        if (code !== 0) notes.failed = `the cloud did not stop cleanly: exit ${code}`;
        return resultOf(this.name, options, ledger, stored, {
          faults,
          startedAt,
          recoveryMs: Math.max(0, ...recoveries),
          notes,
        });
      },
    );
  },
};

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

async function waitFor(predicate: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!predicate()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

const MINUTE_MICROS = 60_000_000;

/**
 * `outage-72h`: 100 sensors at one reading a minute while the uplink is cut (the proxy refuses
 * every connection from the start): 72 hours of readings (432,000; `--duration` sets the span in
 * ms, the short form one hour, 6,000 readings) fed to the gateway as fast as it accepts them, minute
 * by minute, each carrying its own time so that the span really ends now and begins three days ago.
 * Then the path heals and the backlog drains. Every acknowledged reading must be stored once, and
 * arrive oldest first: while it drains, the cloud's API is read over and over
 * (`GET /v1/measurements`, 50 channels a call, each from its first reading not yet seen), and a
 * reading of a sensor stored while an older one of the same sensor is still missing is a reordering,
 * allowed only within the gateway's window of messages in flight (`inflight`, 100: one minute of
 * the 100 sensors). Figures: the drain's time and rate, from the heal, from the reconnect.
 */
export const outage72h: Scenario = {
  name: 'outage-72h',
  description: '100 sensors, 72 h of readings at one a minute buffered while the uplink is cut, then drained',
  databases: ['sqlite'],
  async run(options: ScenarioOptions): Promise<ScenarioResult> {
    const sensors = 100;
    const spanMs = options.durationMs ?? (options.full ? 72 * 3600_000 : 3600_000);
    const minutes = Math.max(1, Math.round(spanMs / 60_000));
    const uplink = uplinkSettings(options.full);
    const startedAt = performance.now();
    return withRig(options, { sensors, uplink, proxy: { kind: 'cut' } }, async (rig) => {
      // Reading m of sensor s is taken at minute m of the span, sensor s 100 ms after sensor s-1:
      // times are distinct, and their order is minute-major, as the feed hands them over.
      const endMicros = Math.floor(Date.now() / 1000) * 1_000_000;
      const tsOf = (m: number, s: number) => endMicros - (minutes - m) * MINUTE_MICROS + s * 100_000;
      const ledger = new Map<string, boolean>();
      const feedStart = performance.now();
      let retries = 0;
      for (let m = 0; m < minutes; m++) {
        await Promise.all(
          rig.devices.map(async (device, s) => {
            const ts = tsOf(m, s) / 1e6;
            const key = device.key(ts);
            for (let attempt = 0; ; attempt++) {
              const ok = await device.notify(ts, 20 + ((m + s) % 100) / 10);
              ledger.set(key, (ledger.get(key) ?? false) || ok);
              if (ok) return;
              retries++;
              if (attempt > 50) return;
              await sleep(100);
            }
          }),
        );
        if (m % 500 === 499) options.log(`outage-72h: ${m + 1}/${minutes} minutes fed`);
      }
      const feedMs = performance.now() - feedStart;
      const accepted = [...ledger.values()].filter(Boolean).length;
      const before = await rig.status();
      options.log(
        `outage-72h: ${accepted} readings accepted in ${seconds(feedMs)}, buffer ${before.buffer.depth}, healing`,
      );
      const mon = monitor(rig);
      const observer = new OrderObserver(rig.inst, rig.devices, minutes, tsOf);
      const healedAt = performance.now();
      await rig.proxy.setMode({ kind: 'pass' });
      const observing = observer.run();
      const drainedAt = await drained(rig, options.full ? 3 * 3600_000 : 600_000);
      observer.stop();
      await observing;
      await mon.stop();
      const firstPuback = mon.samples.find((s) => s.at > healedAt && s.published > 0);
      const stored = (await storedKeys(rig.inst)).filter((k) => k.startsWith('shellyplusht-'));
      const notes: ScenarioResult['notes'] = {
        sensors,
        'minutes per sensor': minutes,
        'span of reading times': `${formatMicros(tsOf(0, 0))} to ${formatMicros(tsOf(minutes - 1, sensors - 1))}`,
        'fed to the gateway, s': Number((feedMs / 1000).toFixed(1)),
        'gateway accept rate /s': Math.round(accepted / (feedMs / 1000)),
        'device retries': retries,
        'buffer at the heal': before.buffer.depth,
        'uplink keepalive s': uplink.keepalive_s,
        'uplink reconnect max ms': uplink.reconnect_max_ms,
        'cloud error log lines': rig.cloud.errors.count,
      };
      if (accepted < ledger.size) notes.refused = ledger.size - accepted;
      let recoveryMs = 0;
      if (drainedAt === null) notes.failed = 'the backlog did not drain';
      else {
        const drainMs = drainedAt - healedAt;
        notes['drain from the heal, s'] = Number((drainMs / 1000).toFixed(1));
        if (firstPuback) {
          recoveryMs = firstPuback.at - healedAt;
          const fromFirst = (drainedAt - firstPuback.at) / 1000;
          notes['first PUBACK after the heal, s'] = Number((recoveryMs / 1000).toFixed(1));
          notes['drain from the first PUBACK, s'] = Number(fromFirst.toFixed(1));
          notes['drain rate, readings/s'] = Math.round(accepted / fromFirst);
        }
      }
      Object.assign(notes, observer.notes());
      const unordered = observer.beyondWindow(uplink.inflight);
      if (unordered > 0)
        notes.failed = `${unordered} readings stored out of order beyond the in-flight window`;
      if (observer.snapshots === 0) notes.failed = 'the drain was never observed';
      const code = await stopCloud(rig.cloud);
      if (code !== 0) notes.failed = `the cloud did not stop cleanly: exit ${code}`;
      return resultOf(this.name, options, ledger, stored, { faults: 1, startedAt, recoveryMs, notes });
    });
  },
};

/**
 * Watches the cloud's stored rows while a backlog drains, through the API, and measures how far
 * from oldest first they arrive. Per sensor it keeps a frontier: the first of its readings (in time
 * order) not yet seen stored. Each read returns, per channel, the stored readings from the
 * frontier on, in time order; one stored while the frontier is still missing arrived before an
 * older reading of the same sensor. Its distance is counted in the feed's order (minute-major, 100
 * readings a minute): the number of readings handed to the gateway between the missing one and it.
 */
class OrderObserver {
  private readonly http: HttpClient;
  private readonly channels = new Map<number, string>();
  private readonly frontier: number[];
  private stopped = false;
  snapshots = 0;
  /** Per reordering seen (`sensor/missing minute`): its largest distance in the feed's order. */
  private readonly reorderings = new Map<string, number>();
  private maxSpread = 0;
  private seen = 0;
  private readonly progress: { at: number; seen: number }[] = [];
  /** Readings seen in order before the gateway's buffer was empty (the rest by the last look). */
  private seenWhileDraining = 0;

  constructor(
    private readonly inst: Installation,
    private readonly devices: NotifyingDevice[],
    private readonly minutes: number,
    private readonly tsOf: (m: number, s: number) => number,
  ) {
    this.http = new HttpClient(inst.url);
    this.frontier = devices.map(() => 0);
  }

  stop(): void {
    this.stopped = true;
  }

  async run(): Promise<void> {
    const started = performance.now();
    while (!this.stopped) {
      await this.resolveChannels();
      const ready = [...this.channels.keys()].filter((s) => this.frontier[s]! < this.minutes);
      for (let i = 0; i < ready.length; i += 50) await this.read(ready.slice(i, i + 50));
      this.snapshots++;
      this.progress.push({ at: performance.now() - started, seen: this.seen });
      if (this.frontier.every((f) => f >= this.minutes)) {
        this.seenWhileDraining = this.seen;
        return;
      }
      await sleep(200);
    }
    this.seenWhileDraining = this.seen;
    // A last look once the gateway's buffer is empty (everything must be there), read by pages of
    // 500 a channel until the frontiers stop moving.
    await this.resolveChannels();
    for (let before = -1; before !== this.seen;) {
      before = this.seen;
      const rest = [...this.channels.keys()].filter((s) => this.frontier[s]! < this.minutes);
      for (let i = 0; i < rest.length; i += 50) await this.read(rest.slice(i, i + 50));
    }
  }

  /** The temperature channel of each sensor, once the cloud has created its device. */
  private async resolveChannels(): Promise<void> {
    if (this.channels.size === this.devices.length) return;
    const bySensor = new Map(this.devices.map((d, s) => [d.id, s]));
    for (let cursor: string | null = null; ;) {
      const page = await this.http.get(
        `/v1/devices?account_id=me&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        { token: this.inst.adminToken },
      );
      if (page.status !== 200) throw new Error(`GET /v1/devices: ${page.status} ${page.text}`);
      const body = page.json as { data: { id: string; local_id: string }[]; next_cursor: string | null };
      for (const d of body.data) {
        const s = bySensor.get(d.local_id);
        if (s === undefined || this.channels.has(s)) continue;
        const list = await this.http.get(`/v1/devices/${d.id}/sensors`, { token: this.inst.adminToken });
        if (list.status !== 200) continue;
        const temperature = (list.json as { data: { kind: string; channel_id: string }[] }).data.find(
          (x) => x.kind === 'temperature',
        );
        if (temperature) this.channels.set(s, temperature.channel_id);
      }
      cursor = body.next_cursor;
      if (!cursor) break;
    }
  }

  private async read(group: number[]): Promise<void> {
    const from = Math.min(...group.map((s) => this.tsOf(this.frontier[s]!, s)));
    const to = this.tsOf(this.minutes, 0) + MINUTE_MICROS;
    const ids = group.map((s) => this.channels.get(s)!).join(',');
    const answer = await this.http.get(
      `/v1/measurements?channel_ids=${ids}&from=${encodeURIComponent(formatMicros(from))}&to=${encodeURIComponent(formatMicros(to))}&limit=500`,
      { token: this.inst.adminToken },
    );
    if (answer.status !== 200) throw new Error(`GET /v1/measurements: ${answer.status} ${answer.text}`);
    const data = (answer.json as { data: Record<string, { ts: string }[]> }).data;
    let lowest = Infinity;
    let highest = -Infinity;
    for (const s of group) {
      const points = data[this.channels.get(s)!] ?? [];
      let f = this.frontier[s]!;
      for (const p of points) {
        const micros = parseTimestampMicros(p.ts)!;
        const m = Math.round((micros - this.tsOf(0, s)) / MINUTE_MICROS);
        if (m < f) continue;
        highest = Math.max(highest, m * 100 + s);
        if (m === f) {
          f++;
          this.seen++;
        } else {
          // Stored while reading f of this sensor is not: a reordering of this many feed places.
          const gap = `${s}/${f}`;
          this.reorderings.set(gap, Math.max(this.reorderings.get(gap) ?? 0, (m - f) * 100));
          break;
        }
      }
      this.frontier[s] = f;
      if (f < this.minutes) lowest = Math.min(lowest, f * 100 + s);
    }
    if (Number.isFinite(lowest) && Number.isFinite(highest))
      this.maxSpread = Math.max(this.maxSpread, highest - lowest);
  }

  /** Reorderings by more than `window` places of the feed's order. */
  beyondWindow(window: number): number {
    return [...this.reorderings.values()].filter((d) => d > window).length;
  }

  notes(): ScenarioResult['notes'] {
    const mid = this.progress.find((p) => p.seen >= this.seen / 2);
    return {
      'order: API reads while draining': this.snapshots,
      'order: readings seen in order while draining': this.seenWhileDraining,
      'order: readings seen in order in all': this.seen,
      'order: reorderings within a sensor': this.reorderings.size,
      'order: largest reordering, feed places': Math.max(0, ...this.reorderings.values()),
      'order: spread of one read, feed places': this.maxSpread,
      ...(mid ? { 'order: half seen after, s': Number((mid.at / 1000).toFixed(1)) } : {}),
    };
  }
}
