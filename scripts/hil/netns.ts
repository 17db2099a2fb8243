import { execFile, execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import { promisify } from 'node:util';

/**
 * The rig's networks, made with `ip netns` and veth pairs (iproute2) and degraded with `tc netem`:
 *
 *   site (emulated devices) ──LAN── gw (the gateway) ──WAN── cloud (the cloud)
 *   192.168.200.2/24                192.168.200.1/24
 *                                   10.200.0.1/30           10.200.0.2/30
 *
 * The private addresses exist only inside the rig's namespaces; the gateway's namespace has no
 * route beyond the WAN link and nothing is forwarded to the machine's own network. Every name
 * carries the run's id, so runs side by side do not meet. Needs root (CAP_NET_ADMIN).
 */

const run = promisify(execFile);

export const LAN = { gateway: '192.168.200.1', site: '192.168.200.2', prefix: 24 } as const;
export const WAN = { gateway: '10.200.0.1', cloud: '10.200.0.2', prefix: 30 } as const;

export interface RigNetwork {
  id: string;
  ns: { site: string; gateway: string; cloud: string };
  /** The WAN link's two ends: in the gateway's namespace and in the cloud's. */
  wan: { gatewaySide: string; cloudSide: string };
  lan: { gatewaySide: string; siteSide: string };
}

async function ip(...args: string[]): Promise<void> {
  await run('ip', args);
}

async function inNs(ns: string, ...command: string[]): Promise<void> {
  await run('ip', ['netns', 'exec', ns, ...command]);
}

/** A short random id for one run: names of namespaces (and veths, at most 15 characters). */
export function runId(): string {
  return crypto.randomBytes(3).toString('hex');
}

/**
 * Makes the three namespaces and the two links. `lanInterface` (physical mode): a real network
 * interface moved into the gateway's namespace as its LAN instead of the veth to the site
 * namespace, with `lanAddress` (CIDR) on it.
 */
export async function createNetwork(
  id: string,
  options: { lanInterface?: string; lanAddress?: string } = {},
): Promise<RigNetwork> {
  const net: RigNetwork = {
    id,
    ns: { site: `hil-${id}-site`, gateway: `hil-${id}-gw`, cloud: `hil-${id}-cloud` },
    wan: { gatewaySide: `hilw${id}g`, cloudSide: `hilw${id}c` },
    lan: { gatewaySide: options.lanInterface ?? `hill${id}g`, siteSide: `hill${id}s` },
  };
  for (const ns of Object.values(net.ns)) {
    await ip('netns', 'add', ns);
    await inNs(ns, 'ip', 'link', 'set', 'lo', 'up');
  }
  await ip('link', 'add', net.wan.gatewaySide, 'type', 'veth', 'peer', 'name', net.wan.cloudSide);
  await ip('link', 'set', net.wan.gatewaySide, 'netns', net.ns.gateway);
  await ip('link', 'set', net.wan.cloudSide, 'netns', net.ns.cloud);
  await inNs(net.ns.gateway, 'ip', 'addr', 'add', `${WAN.gateway}/${WAN.prefix}`, 'dev', net.wan.gatewaySide);
  await inNs(net.ns.cloud, 'ip', 'addr', 'add', `${WAN.cloud}/${WAN.prefix}`, 'dev', net.wan.cloudSide);
  await inNs(net.ns.gateway, 'ip', 'link', 'set', net.wan.gatewaySide, 'up');
  await inNs(net.ns.cloud, 'ip', 'link', 'set', net.wan.cloudSide, 'up');
  if (options.lanInterface) {
    await ip('link', 'set', options.lanInterface, 'netns', net.ns.gateway);
    await inNs(net.ns.gateway, 'ip', 'addr', 'add', options.lanAddress!, 'dev', options.lanInterface);
    await inNs(net.ns.gateway, 'ip', 'link', 'set', options.lanInterface, 'up');
  } else {
    await ip('link', 'add', net.lan.gatewaySide, 'type', 'veth', 'peer', 'name', net.lan.siteSide);
    await ip('link', 'set', net.lan.gatewaySide, 'netns', net.ns.gateway);
    await ip('link', 'set', net.lan.siteSide, 'netns', net.ns.site);
    await inNs(
      net.ns.gateway,
      'ip',
      'addr',
      'add',
      `${LAN.gateway}/${LAN.prefix}`,
      'dev',
      net.lan.gatewaySide,
    );
    await inNs(net.ns.site, 'ip', 'addr', 'add', `${LAN.site}/${LAN.prefix}`, 'dev', net.lan.siteSide);
    await inNs(net.ns.gateway, 'ip', 'link', 'set', net.lan.gatewaySide, 'up');
    await inNs(net.ns.site, 'ip', 'link', 'set', net.lan.siteSide, 'up');
  }
  return net;
}

/** The WAN's condition: both directions, on both ends of the link. */
export type WanCondition = { kind: 'up' } | { kind: 'cut' } | { kind: 'delay'; ms: number; jitterMs: number };

/**
 * How the WAN is degraded. `netem`: `tc qdisc ... netem loss 100%` for a cut and `netem delay` for
 * a slow link. Kernels built without sch_netem (some VM kernels) get `fallback`: a cut is an
 * iptables DROP of everything arriving on either end of the link (the same 100% loss, both ways:
 * packets leave and vanish), and the slow link is a token bucket (`tc qdisc ... tbf`), which
 * delays by queueing rather than by a fixed time.
 */
export type WanTool = 'netem' | 'fallback';

/** Whether this kernel has netem, tried on the WAN link's gateway end. */
export async function wanTool(net: RigNetwork): Promise<WanTool> {
  try {
    await inNs(
      net.ns.gateway,
      'tc',
      'qdisc',
      'add',
      'dev',
      net.wan.gatewaySide,
      'root',
      'netem',
      'delay',
      '0ms',
    );
    await inNs(net.ns.gateway, 'tc', 'qdisc', 'del', 'dev', net.wan.gatewaySide, 'root');
    return 'netem';
  } catch {
    return 'fallback';
  }
}

export async function setWan(net: RigNetwork, condition: WanCondition, tool: WanTool): Promise<void> {
  for (const [ns, dev] of [
    [net.ns.gateway, net.wan.gatewaySide],
    [net.ns.cloud, net.wan.cloudSide],
  ] as const) {
    // Back to a clean link first (removing what is not there is fine).
    await inNs(ns, 'tc', 'qdisc', 'del', 'dev', dev, 'root').catch(() => undefined);
    if (tool === 'fallback')
      await inNs(ns, 'iptables', '-D', 'INPUT', '-i', dev, '-j', 'DROP').catch(() => undefined);
    if (condition.kind === 'cut') {
      if (tool === 'netem') await inNs(ns, 'tc', 'qdisc', 'add', 'dev', dev, 'root', 'netem', 'loss', '100%');
      else await inNs(ns, 'iptables', '-A', 'INPUT', '-i', dev, '-j', 'DROP');
    }
    if (condition.kind === 'delay') {
      const { ms, jitterMs } = condition;
      if (tool === 'netem')
        await inNs(
          ns,
          'tc',
          'qdisc',
          'add',
          'dev',
          dev,
          'root',
          'netem',
          'delay',
          `${ms}ms`,
          `${jitterMs}ms`,
        );
      // 256 kbit/s, packets queued up to `ms` (then dropped, as a congested uplink does).
      else
        await inNs(
          ns,
          'tc',
          'qdisc',
          'add',
          'dev',
          dev,
          'root',
          'tbf',
          'rate',
          '256kbit',
          'burst',
          '4kb',
          'latency',
          `${ms}ms`,
        );
    }
  }
}

/** `ip netns exec <ns>` with the command: for spawning a process inside a namespace. */
export function nsCommand(ns: string, command: string[]): [string, string[]] {
  return ['ip', ['netns', 'exec', ns, ...command]];
}

/**
 * Removes the run's namespaces (and with them its veths; a physical interface returns to the
 * machine's namespace), after ending every process still inside them. Synchronous, so it also
 * runs from an exit handler; never throws.
 */
export function destroyNetwork(net: Pick<RigNetwork, 'ns'>): void {
  for (const ns of Object.values(net.ns)) {
    try {
      const pids = execFileSync('ip', ['netns', 'pids', ns], { encoding: 'utf8', stdio: 'pipe' })
        .split('\n')
        .filter(Boolean)
        .map(Number);
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    } catch {
      // the namespace does not exist (never made, or already removed)
    }
    try {
      execFileSync('ip', ['netns', 'del', ns], { stdio: 'pipe' });
    } catch {
      // already removed
    }
  }
}

/** The namespaces of the rig's runs that exist now (for the test's leak check). */
export function rigNamespaces(id?: string): string[] {
  const out = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  return out
    .split('\n')
    .map((l) => l.split(' ')[0]!)
    .filter((n) => (id ? n.startsWith(`hil-${id}-`) : n.startsWith('hil-')));
}
