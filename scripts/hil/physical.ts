import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { Agent } from './agent.ts';
import {
  compareLedger,
  type CheckResult,
  type CloudPoint,
  type DeviceCheck,
  type LedgerEntry,
} from './ledger.ts';
import { createNetwork, destroyNetwork, nsCommand, runId, setWan, WAN, wanTool } from './netns.ts';
import { PhysicalConfigError, readPhysicalConfig, type PhysicalConfig } from './physical-config.ts';
import { printResult, ROOT, sleep, startGateway, until, type RigResult, type Status } from './run.ts';

/** The gateway's configuration for the real devices of the rig file. */
export function physicalGatewayConfig(config: PhysicalConfig): Record<string, unknown> {
  const cs = config.chirpstack;
  return {
    gateway: { id: 'gw-hil', data_dir: './data', log_level: 'info', status_interval_s: 3600 },
    uplink: {
      bundle: './bridge.json',
      keepalive_s: 15,
      connect_timeout_ms: 10000,
      reconnect_min_ms: 500,
      reconnect_max_ms: 10000,
    },
    status_page: { host: '0.0.0.0', port: 8080 },
    collectors: {
      ...(config.shelly_gen1.length ? { shelly_http: { host: '0.0.0.0', port: 8081 } } : {}),
      ...(config.shelly_plus.length ? { shelly_mqtt: { host: '0.0.0.0', port: 1883 } } : {}),
      ...(config.serial.length
        ? {
            serial: {
              ports: config.serial.map((s) => ({
                path: s.port,
                device: s.device,
                baud_rate: s.baud_rate,
                format: s.format,
              })),
            },
          }
        : {}),
      ...(cs
        ? {
            chirpstack: {
              url: cs.url,
              ...(cs.username ? { username: cs.username, password: cs.password } : {}),
              application_id: cs.application_id,
              client_id: 'gw-hil-chirpstack',
              encoding: 'json',
              devices: Object.fromEntries(cs.devices.map((d) => [d.dev_eui, { model: d.model }])),
            },
          }
        : {}),
    },
  };
}

/**
 * Shelly Gen1 H&Ts send no time of their own, and the rig cannot see their requests: all of them
 * together are checked by count, the gateway's `accepted` counter of its Shelly HTTP collector
 * during the run against the cloud's points of those devices since the run began.
 */
export function gen1CountCheck(
  ids: string[],
  acceptedDuringRun: number,
  points: CloudPoint[],
  since: number,
): DeviceCheck {
  const inCloud = points.filter(
    (p) => ids.includes(p.device) && p.kind === 'temperature' && p.label === null && p.ts >= since,
  ).length;
  return {
    device: ids.join(','),
    source: 'shelly-gen1',
    sent: acceptedDuringRun,
    accepted: acceptedDuringRun,
    inCloud,
    lost: Math.max(0, acceptedDuringRun - inCloud),
    duplicated: 0,
    unexpected: Math.max(0, inCloud - acceptedDuringRun),
  };
}

/**
 * `npm run hil -- --physical FILE`: the same run as the emulated rig's (run.ts), with the real
 * devices of FILE on the LAN interface it names, moved into the gateway's namespace for the run
 * (docs/hil.md, "A physical rig"). What the devices sent is observed by physical-agent.ts.
 * Returns the exit code.
 */
export async function runPhysical(file: string): Promise<number> {
  const say = (line: string) => process.stdout.write(`${line}\n`);
  let config: PhysicalConfig;
  try {
    config = readPhysicalConfig(file);
  } catch (err) {
    if (err instanceof PhysicalConfigError) {
      process.stderr.write(`${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const t = config.timeline;
  const started = Date.now();
  const id = runId();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `hil-${id}-`));
  const netRef = { ns: { site: `hil-${id}-site`, gateway: `hil-${id}-gw`, cloud: `hil-${id}-cloud` } };
  const onExit = () => destroyNetwork(netRef);
  process.once('exit', onExit);
  const agents: Agent<unknown>[] = [];
  let gateway: ChildProcess | null = null;
  const failures: string[] = [];
  try {
    say(
      `rig ${id} (physical, ${file}): LAN ${config.lan.interface} ${config.lan.address} in the gateway's namespace`,
    );
    const net = await createNetwork(id, {
      lanInterface: config.lan.interface,
      lanAddress: config.lan.address,
    });
    const tool = await wanTool(net);
    const agent = (name: string, ns: string, script: string, args: string[]) =>
      Agent.spawn<Record<string, unknown>>(
        name,
        nsCommand(ns, [
          process.execPath,
          '--import',
          'tsx',
          path.join(ROOT, `scripts/hil/${script}`),
          ...args,
        ]),
        say,
      );
    const cloud = agent('cloud', net.ns.cloud, 'cloud-agent.ts', ['--listen', WAN.cloud, '--dir', dir]);
    agents.push(cloud);
    const { bundle } = (await cloud.ready) as { bundle: Record<string, string> };
    const gwDir = path.join(dir, 'gateway');
    fs.mkdirSync(gwDir);
    fs.writeFileSync(path.join(gwDir, 'bridge.json'), JSON.stringify(bundle), { mode: 0o600 });
    const configFile = path.join(gwDir, 'gateway.yaml');
    fs.writeFileSync(configFile, YAML.stringify(physicalGatewayConfig(config)));
    const logFile = path.join(dir, 'gateway.log');
    gateway = startGateway(net, configFile, false, logFile);
    const observer = agent('observer', net.ns.gateway, 'physical-agent.ts', ['--config', path.resolve(file)]);
    agents.push(observer);
    await observer.ready;
    const status = () => observer.call<Status>('status', {}, 15_000);
    await until(
      'the gateway with its uplink connected',
      120_000,
      async () => (await status()).uplink.state === 'connected',
    );
    const gen1Before = (await status()).collectors['shelly-http']?.accepted ?? 0;
    const since = Date.now();
    await observer.call('start');
    say(`observing the devices; WAN normal for ${t.warm_s} s`);
    await sleep(t.warm_s * 1000);
    await setWan(net, { kind: 'delay', ms: 300, jitterMs: 100 }, tool);
    say(`WAN slowed for ${t.delay_s} s`);
    await sleep(t.delay_s * 1000);
    await setWan(net, { kind: 'cut' }, tool);
    say(`WAN cut for ${t.cut_s} s`);
    let maxBufferDepth = 0;
    const cutEnds = Date.now() + t.cut_s * 1000;
    while (Date.now() < cutEnds) {
      maxBufferDepth = Math.max(maxBufferDepth, (await status().catch(() => null))?.buffer.depth ?? 0);
      await sleep(Math.min(5000, Math.max(0, cutEnds - Date.now())));
    }
    await setWan(net, { kind: 'up' }, tool);
    const restoredAt = Date.now();
    await sleep(t.after_s * 1000);
    await observer.call('stop');
    await until('an empty buffer', 600_000, async () => (await status()).buffer.depth === 0);
    const drainS = (Date.now() - restoredAt) / 1000;
    const final = await status();
    const ledger = await observer.call<LedgerEntry[]>('ledger');
    const points = await cloud.call<CloudPoint[]>('points');
    const observed: CheckResult = ledger.length ? compareLedger(ledger, points) : { ok: true, devices: [] };
    const devices = [...observed.devices];
    if (config.shelly_gen1.length) {
      const accepted = (final.collectors['shelly-http']?.accepted ?? 0) - gen1Before;
      devices.push(
        gen1CountCheck(
          config.shelly_gen1.map((d) => d.id),
          accepted,
          points,
          since,
        ),
      );
    }
    const ok =
      devices.length > 0 && devices.every((d) => d.lost === 0 && d.duplicated === 0 && d.unexpected === 0);
    if (!ok) failures.push('the cloud does not hold every accepted reading exactly once');
    for (const [name, c] of Object.entries(final.collectors))
      if (c.refused || c.lost) failures.push(`collector ${name}: ${c.refused} refused, ${c.lost} lost`);
    const result: RigResult = {
      ok: ok && failures.length === 0,
      mode: 'physical',
      timeline: {
        warmS: t.warm_s,
        delayS: t.delay_s,
        delayMs: 300,
        jitterMs: 100,
        cutS: t.cut_s,
        afterS: t.after_s,
        intervalMs: t.serial_interval_s * 1000,
      },
      gateway: 'sources',
      wan: tool,
      check: { ok, devices },
      figures: {
        maxBufferDepth,
        drainS,
        uplinkConnects: final.uplink.connects,
        totalS: (Date.now() - started) / 1000,
      },
      failures,
    };
    printResult(result, say);
    return result.ok ? 0 : 1;
  } finally {
    if (gateway && gateway.exitCode === null) {
      const exited = new Promise((r) => gateway!.once('exit', r));
      gateway.kill('SIGTERM');
      await Promise.race([exited, sleep(20_000)]);
    }
    await Promise.all(agents.map((a) => a.stop().catch(() => undefined)));
    // The LAN interface returns to the machine's own namespace with the namespace's removal.
    destroyNetwork(netRef);
    process.off('exit', onExit);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
