import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import YAML from 'yaml';
import { Agent } from './agent.ts';
import {
  compareLedger,
  SITE_DEVICES,
  type CheckResult,
  type CloudPoint,
  type LedgerEntry,
} from './ledger.ts';
import {
  createNetwork,
  destroyNetwork,
  LAN,
  nsCommand,
  runId,
  setWan,
  WAN,
  wanTool,
  type RigNetwork,
  type WanTool,
} from './netns.ts';

/**
 * `npm run hil -- [--short] [--cut-s N] [--bundle] [--json FILE]`: the hardware-in-the-loop rig
 * (docs/hil.md). The cloud, the gateway and every emulator run in network namespaces of their own
 * (netns.ts): the emulated site on the gateway's LAN, the cloud across a WAN link. The emulators
 * report; the WAN is slowed (netem delay), cut (netem loss 100%) and restored; then every reading
 * each emulator was told was accepted must be in the cloud's API exactly once (ledger.ts).
 * `--short` is the test suite's form (a cut of seconds); the default is the long form.
 * `--bundle` runs the production build (dist/gateway/gateway.mjs, `npm run build:gateway`) instead
 * of the sources. Exit 0 when every check passes, 1 when one fails, 2 when the rig cannot run.
 */

export const ROOT = path.resolve(import.meta.dirname, '../..');

export interface Timeline {
  /** Normal running before anything happens to the WAN. */
  warmS: number;
  /** The WAN slowed: `delayMs` ± `jitterMs` each way. */
  delayS: number;
  delayMs: number;
  jitterMs: number;
  /** The WAN cut (100% loss both ways). */
  cutS: number;
  /** Running after the WAN is back, before the devices stop. */
  afterS: number;
  /** Each emulator's report interval. */
  intervalMs: number;
}

export const SHORT: Timeline = {
  warmS: 3,
  delayS: 3,
  delayMs: 150,
  jitterMs: 50,
  cutS: 8,
  afterS: 4,
  intervalMs: 500,
};
export const LONG: Timeline = {
  warmS: 20,
  delayS: 30,
  delayMs: 300,
  jitterMs: 100,
  cutS: 180,
  afterS: 30,
  intervalMs: 1000,
};

export interface RigResult {
  ok: boolean;
  mode: 'emulated' | 'physical';
  timeline: Timeline;
  gateway: 'sources' | 'bundle';
  /** How the WAN was degraded (netns.ts). */
  wan: WanTool;
  check: CheckResult;
  figures: {
    /** Buffer depth at its highest during the cut. */
    maxBufferDepth: number;
    /** Seconds from the WAN's return to an empty buffer. */
    drainS: number | null;
    /** Uplink connections made in all (1 + reconnects). */
    uplinkConnects: number;
    /** Seconds the whole run took, namespaces included. */
    totalS: number;
  };
  failures: string[];
}

export type Status = {
  buffer: { depth: number };
  uplink: { state: string; connects: number };
  collectors: Record<string, { state: string; accepted: number; refused: number; lost: number }>;
};

/** The gateway process ended while the rig waited on it: no point waiting longer. */
export class GatewayExited extends Error {}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function until<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | null | false>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown = null;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
    } catch (err) {
      if (err instanceof GatewayExited) throw err;
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (${last instanceof Error ? last.message : JSON.stringify(last)})` : ''}`,
      );
    await sleep(250);
  }
}

/** The gateway, started in its namespace with `ip netns exec`; its JSON log lines to `logFile`. */
export function startGateway(
  net: RigNetwork,
  configFile: string,
  bundle: boolean,
  logFile: string,
): ChildProcess {
  const node = [process.execPath, '--max-old-space-size=64', '--max-semi-space-size=2'];
  const program = bundle
    ? [path.join(ROOT, 'dist/gateway/gateway.mjs')]
    : ['--import', 'tsx', path.join(ROOT, 'gateway/src/main.ts')];
  const [cmd, args] = nsCommand(net.ns.gateway, [...node, ...program, '--config', configFile]);
  const out = fs.openSync(logFile, 'a');
  const child = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', out, out] });
  fs.closeSync(out);
  return child;
}

export async function runRig(options: {
  timeline: Timeline;
  bundle?: boolean;
  say?: (line: string) => void;
}): Promise<RigResult> {
  const say = options.say ?? ((line: string) => process.stdout.write(`${line}\n`));
  const t = options.timeline;
  const started = Date.now();
  const id = runId();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `hil-${id}-`));
  const failures: string[] = [];
  let net: RigNetwork | null = null;
  const netRef = { ns: { site: `hil-${id}-site`, gateway: `hil-${id}-gw`, cloud: `hil-${id}-cloud` } };
  // Whatever happens (an exception, Ctrl-C, the test runner ending the process), the namespaces go.
  const onExit = () => destroyNetwork(netRef);
  const onSignal = (signal: NodeJS.Signals) => {
    destroyNetwork(netRef);
    fs.rmSync(dir, { recursive: true, force: true });
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.once('exit', onExit);
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const agents: Agent<unknown>[] = [];
  let gateway: ChildProcess | null = null;
  const gatewayLog = path.join(dir, 'gateway.log');
  try {
    say(`rig ${id}: namespaces ${Object.values(netRef.ns).join(', ')}; files in ${dir}`);
    net = await createNetwork(id);
    const tool = await wanTool(net);
    if (tool === 'fallback')
      say('this kernel has no netem: the WAN is cut with iptables DROP and slowed with tbf');

    const tsx = (script: string, args: string[]) =>
      nsCommand(script === 'cloud' ? net!.ns.cloud : net!.ns.site, [
        process.execPath,
        '--import',
        'tsx',
        path.join(ROOT, `scripts/hil/${script}-agent.ts`),
        ...args,
      ]);
    const log = (line: string) => say(line);
    const cloud = Agent.spawn<{ bundle: Record<string, string>; siteId: string }>(
      'cloud',
      tsx('cloud', ['--listen', WAN.cloud, '--dir', dir]),
      log,
    );
    agents.push(cloud);
    const site = Agent.spawn<{ brokerUrl: string; serialPath: string }>(
      'site',
      tsx('site', ['--gateway', LAN.gateway, '--listen', LAN.site, '--dir', dir]),
      log,
    );
    agents.push(site);
    const [{ bundle }, { brokerUrl, serialPath }] = await Promise.all([cloud.ready, site.ready]);
    say(`cloud up in ${net.ns.cloud} (bridge ${bundle.id}, ${bundle.mqtt_url}); site up in ${net.ns.site}`);

    const gwDir = path.join(dir, 'gateway');
    fs.mkdirSync(gwDir);
    fs.writeFileSync(path.join(gwDir, 'bridge.json'), JSON.stringify(bundle), { mode: 0o600 });
    const configFile = path.join(gwDir, 'gateway.yaml');
    fs.writeFileSync(
      configFile,
      YAML.stringify({
        gateway: { id: 'gw-hil', data_dir: './data', log_level: 'info', status_interval_s: 3600 },
        uplink: {
          bundle: './bridge.json',
          keepalive_s: 5,
          connect_timeout_ms: 5000,
          reconnect_min_ms: 250,
          reconnect_max_ms: 2000,
        },
        status_page: { host: '0.0.0.0', port: 8080 },
        collectors: {
          shelly_http: { host: '0.0.0.0', port: 8081 },
          shelly_mqtt: { host: '0.0.0.0', port: 1883 },
          serial: {
            ports: [
              {
                path: serialPath,
                device: SITE_DEVICES.serial,
                format: 'kv',
                reopen_min_ms: 100,
                reopen_max_ms: 1000,
              },
            ],
          },
          chirpstack: {
            url: brokerUrl,
            client_id: 'gw-hil-chirpstack',
            devices: { [SITE_DEVICES.chirpstack]: { model: 'cayenne-lpp' } },
          },
        },
      }),
    );
    gateway = startGateway(net, configFile, options.bundle ?? false, gatewayLog);
    const status = async () => {
      if (gateway!.exitCode !== null || gateway!.signalCode !== null)
        throw new GatewayExited(`the gateway exited (${gateway!.exitCode ?? gateway!.signalCode})`);
      return site.call<Status>('status', {}, 15_000);
    };
    await until(
      'the gateway: uplink connected, serial open, ChirpStack connected (seen from the LAN)',
      120_000,
      async () => {
        if (gateway!.exitCode !== null) throw new Error(`the gateway exited (${gateway!.exitCode})`);
        const s = await status();
        return (
          s.uplink.state === 'connected' &&
          s.collectors.serial?.state === 'open' &&
          s.collectors.chirpstack?.state === 'connected' &&
          s
        );
      },
    );
    const page = await site.call<string>('page');
    if (!page.includes('gw-hil'))
      failures.push('the status page seen from the LAN does not name the gateway');
    say(
      `gateway up in ${net.ns.gateway}: uplink connected to ${WAN.cloud}, status page reachable from the LAN`,
    );

    await site.call('start', { intervalMs: t.intervalMs });
    say(`devices reporting every ${t.intervalMs} ms; WAN normal for ${t.warmS} s`);
    await sleep(t.warmS * 1000);
    await setWan(net, { kind: 'delay', ms: t.delayMs, jitterMs: t.jitterMs }, tool);
    say(
      tool === 'netem'
        ? `WAN slowed (netem delay ${t.delayMs} ms ± ${t.jitterMs} ms) for ${t.delayS} s`
        : `WAN slowed (tbf 256 kbit/s, queue up to ${t.delayMs} ms) for ${t.delayS} s`,
    );
    await sleep(t.delayS * 1000);
    await setWan(net, { kind: 'cut' }, tool);
    say(`WAN cut (${tool === 'netem' ? 'netem loss 100%' : 'iptables DROP on both ends'}) for ${t.cutS} s`);
    let maxBufferDepth = 0;
    const cutEnds = Date.now() + t.cutS * 1000;
    while (Date.now() < cutEnds) {
      const s = await status().catch(() => null);
      if (s) maxBufferDepth = Math.max(maxBufferDepth, s.buffer.depth);
      if (!s && (gateway.exitCode !== null || gateway.signalCode !== null)) await status();
      await sleep(Math.min(1000, Math.max(0, cutEnds - Date.now())));
    }
    if (maxBufferDepth === 0) failures.push('the buffer never filled while the WAN was cut');
    await setWan(net, { kind: 'up' }, tool);
    const restoredAt = Date.now();
    say(`WAN restored; buffer held ${maxBufferDepth} readings at most during the cut`);
    let drainS: number | null = null;
    const drained = until(
      'the buffer to drain after the WAN came back',
      180_000,
      async () => (await status()).buffer.depth === 0,
    ).then(() => (drainS = (Date.now() - restoredAt) / 1000));
    await sleep(t.afterS * 1000);
    const stopped = await site.call<{ sent: number; unsettled: number }>('stop');
    say(
      `devices stopped: ${stopped.sent} readings sent${stopped.unsettled ? `, ${stopped.unsettled} never settled` : ''}`,
    );
    await drained;
    await until(
      'an empty buffer after the last reading',
      180_000,
      async () => (await status()).buffer.depth === 0,
    );
    const final = await status();
    for (const [name, c] of Object.entries(final.collectors))
      if (c.refused || c.lost) failures.push(`collector ${name}: ${c.refused} refused, ${c.lost} lost`);

    const ledger = await site.call<LedgerEntry[]>('ledger');
    // The cloud stores a reading before acknowledging it, so once the buffer is empty the API has
    // everything; the check is repeated briefly in case a reading is still between the two.
    let check: CheckResult = compareLedger(ledger, await cloud.call<CloudPoint[]>('points'));
    for (let i = 0; !check.ok && i < 10; i++) {
      await sleep(1000);
      check = compareLedger(ledger, await cloud.call<CloudPoint[]>('points'));
    }
    if (!check.ok) failures.push('the cloud does not hold every accepted reading exactly once');
    const result: RigResult = {
      ok: failures.length === 0 && check.ok,
      mode: 'emulated',
      timeline: t,
      gateway: options.bundle ? 'bundle' : 'sources',
      wan: tool,
      check,
      figures: {
        maxBufferDepth,
        drainS,
        uplinkConnects: final.uplink.connects,
        totalS: 0,
      },
      failures,
    };
    return result;
  } catch (err) {
    if (fs.existsSync(gatewayLog)) {
      const tail = fs.readFileSync(gatewayLog, 'utf8').split('\n').slice(-30).join('\n');
      say(`gateway log (last lines):\n${tail}`);
    }
    throw err;
  } finally {
    if (gateway && gateway.exitCode === null) {
      const exited = new Promise((r) => gateway!.once('exit', r));
      gateway.kill('SIGTERM');
      await Promise.race([exited, sleep(20_000)]);
    }
    await Promise.all(agents.map((a) => a.stop().catch(() => undefined)));
    destroyNetwork(netRef);
    process.off('exit', onExit);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    fs.rmSync(dir, { recursive: true, force: true });
    say(`rig ${id}: namespaces removed (${((Date.now() - started) / 1000).toFixed(1)} s in all)`);
  }
}

export function printResult(result: RigResult, say: (line: string) => void): void {
  say('\ndevice                       source        sent  accepted  in cloud  lost  dup  unexpected');
  for (const d of result.check.devices)
    say(
      `${d.device.padEnd(28)} ${d.source.padEnd(12)} ${String(d.sent).padStart(5)} ${String(d.accepted).padStart(9)} ${String(d.inCloud).padStart(9)} ${String(d.lost).padStart(5)} ${String(d.duplicated).padStart(4)} ${String(d.unexpected).padStart(11)}`,
    );
  const f = result.figures;
  say(
    `\nbuffer at most ${f.maxBufferDepth} readings during the cut; drained ${f.drainS === null ? '?' : `${f.drainS.toFixed(1)} s`} after the WAN came back; uplink connections ${f.uplinkConnects}; ${f.totalS.toFixed(1)} s in all`,
  );
  for (const failure of result.failures) say(`FAIL: ${failure}`);
  say(result.ok ? 'HIL: every accepted reading arrived exactly once' : 'HIL: FAILED');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      short: { type: 'boolean', default: false },
      'cut-s': { type: 'string' },
      bundle: { type: 'boolean', default: false },
      json: { type: 'string' },
      physical: { type: 'string' },
    },
  });
  if (process.getuid?.() !== 0) {
    process.stderr.write('the rig makes network namespaces (ip netns): run it as root\n');
    process.exit(2);
  }
  if (values.physical) {
    const { runPhysical } = await import('./physical.ts');
    process.exit(await runPhysical(values.physical));
  }
  const timeline = { ...(values.short ? SHORT : LONG) };
  if (values['cut-s']) timeline.cutS = Number(values['cut-s']);
  if (values.bundle && !fs.existsSync(path.join(ROOT, 'dist/gateway/gateway.mjs'))) {
    process.stderr.write('--bundle: run npm run build:gateway first\n');
    process.exit(2);
  }
  const started = Date.now();
  const result = await runRig({ timeline, bundle: values.bundle });
  result.figures.totalS = (Date.now() - started) / 1000;
  const say = (line: string) => process.stdout.write(`${line}\n`);
  printResult(result, say);
  if (values.json) fs.writeFileSync(values.json, `${JSON.stringify(result, null, 2)}\n`);
  process.exit(result.ok ? 0 : 1);
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  main().catch((err: unknown) => {
    process.stderr.write(
      `HIL rig failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(2);
  });
}
