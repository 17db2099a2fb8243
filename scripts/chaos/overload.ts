import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { promisify } from 'node:util';
import pg from 'pg';
import { check } from './checker.ts';
import { prepareInstallation, startCloud, stopCloud, storedKeys, type CloudRun } from './installation.ts';
import { PipelinedSender } from './pipelined.ts';
import type { Scenario, ScenarioOptions, ScenarioResult } from './types.ts';

const run = promisify(execFile);

const DEVICES = 20;
/**
 * Connections of the generator. HTTP/1.1 answers a connection's pipelined requests in order, so a
 * shed request's answer waits behind the accepted ones sent before it on its connection: many
 * connections with a few requests each, as a fleet of devices has, rather than a few long pipelines.
 * CHAOS_CONNECTIONS sets another count (the process-wide bounds of cloud/src/http/connections.ts
 * are what keep memory bounded with thousands).
 */
const CONNECTIONS = Number(process.env.CHAOS_CONNECTIONS ?? 256);
/**
 * Connections of the sustainable-rate measure, each keeping one request open: 256, or all of them
 * when fewer, so that the cloud's groups fill as they do under overload (with 64, SQLite acknowledged
 * twice the measured rate during the overload). Not more: with thousands of requests open in a closed
 * loop each waits as long as ingest lets the oldest wait (INGEST_MAX_WAIT_MS, Little's law), and the
 * measure itself is shed.
 */
const MEASURE_CONNECTIONS = Math.min(CONNECTIONS, 256);
/**
 * Requests open at once, at most: the generator's own bound (a reading due beyond it is not sent).
 * The short form keeps fewer, so that the backlog it leaves drains within seconds on a slow CI run.
 * CHAOS_MAX_OPEN sets the full form's.
 */
const MAX_OPEN = { full: Number(process.env.CHAOS_MAX_OPEN ?? 50_000), short: 2000 };
/** How much more than the sustainable rate the overload offers. */
const FACTOR = 10;
/** Memory the cloud may reach under overload: far above its working set, far below a small host's RAM. */
const RSS_LIMIT = 1024 * 1024 * 1024;
/**
 * The cloud's V8 heap limit, as docs/operations.md has operators set it (NODE_OPTIONS). Without one V8
 * grows its heap lazily towards its own limit (a quarter of the RAM, up to 4 GiB): RSS then says how
 * much garbage V8 let pile up, not what the process holds. CHAOS_CLOUD_NODE_OPTIONS replaces it (empty:
 * no options, V8's own limit).
 */
const CLOUD_NODE_OPTIONS = process.env.CHAOS_CLOUD_NODE_OPTIONS ?? '--max-old-space-size=512';
/**
 * How long after the overload the rate must be back (to 90 % of the rate before; half in the short
 * form). The short form runs in CI beside other tests that load the same two cores, so its rate
 * windows move with them: it is given longer (it stops at the first window that is back).
 */
const BACK_WITHIN_MS = { full: 15_000, short: 30_000 };
/**
 * How long after the overload the rate is measured at all (CHAOS_WATCH_MS; BACK_WITHIN_MS unless
 * longer): every window is reported, and only those begun within BACK_WITHIN_MS count for the
 * verdict. A longer watch shows where the rate settles and how much it moves from window to window.
 */
const WATCH_MS = Number(process.env.CHAOS_WATCH_MS ?? 0);
/** The closed loop before the rate is measured (CHAOS_WARMUP_MS; 3 s, 0.5 s in the short form). */
const WARMUP_MS = process.env.CHAOS_WARMUP_MS ? Number(process.env.CHAOS_WARMUP_MS) : null;

/**
 * Scenario 5 of issue 24: ten times the sustainable ingest rate. The sustainable rate is measured
 * first (readings acknowledged per second by CONNECTIONS connections that each keep one request open);
 * then readings are due at ten times that rate whatever the answers (an open loop, as a fleet of
 * devices sends), for the scenario's duration; then the rate is measured again, in short windows,
 * until it is back. The generator is `pipelined.ts` (raw keep-alive connections, pipelined), in this
 * process; on a machine with two or more cores the cloud is pinned to the last core and this
 * process to the others (`taskset`), so that neither takes the other's CPU.
 *
 * Passes when every answer is 200, 429 or 503 with Retry-After and every request is answered; the
 * process lives and its RSS stays under RSS_LIMIT; the rate is back to 90 % of the rate before
 * (half, in the short form, on a loaded CI machine) within BACK_WITHIN_MS of the overload's end; and,
 * as in every scenario, every acknowledged reading is stored once. Recovery: from the end of the
 * overload until every request of it was answered (the backlog drained).
 */
export const overload: Scenario = {
  name: 'overload',
  description: `${FACTOR}x the sustainable HTTP ingest rate, open loop; answers only 200/429/503, memory bounded, rate back`,
  async run(options: ScenarioOptions): Promise<ScenarioResult> {
    const overloadMs = options.durationMs ?? (options.full ? 60_000 : 3000);
    const measureMs = options.full ? 10_000 : 2000;
    const windowMs = options.full ? 2000 : 1000;
    const recovered = options.full ? 0.9 : 0.5;
    const inst = await prepareInstallation({ db: options.db, httpDevices: DEVICES });
    const startedAt = performance.now();
    const cloud = await startCloud(inst, { NODE_OPTIONS: CLOUD_NODE_OPTIONS });
    const pinned = await pin(cloud);
    const sender = await PipelinedSender.open({ port: inst.httpPort, devices: inst.devices }, CONNECTIONS);
    const cpu = () => process.cpuUsage();
    const postgres = options.db === 'postgres' ? await PostgresFigures.open(inst.databaseUrl) : null;
    try {
      // Warm up: channels made, statements prepared (CHAOS_WARMUP_MS for longer: the rate before
      // then measured on an older process and a larger database).
      await sender.closedLoop(MEASURE_CONNECTIONS, WARMUP_MS ?? (options.full ? 3000 : 500));
      // CPU each side used while the rate was measured: which one was the limit.
      const busy: string[] = [];
      const measured = async (ms: number) => {
        const pgAt = await postgres?.figures();
        const groupsAt = await groupFigures(inst.httpPort);
        const [ownAt, cloudAt, at, shedAt] = [
          cpu(),
          cloudCpu(cloud),
          performance.now(),
          sender.answers['503'] ?? 0,
        ];
        const rate = await sender.closedLoop(MEASURE_CONNECTIONS, ms);
        const [own, seconds] = [cpu(), (performance.now() - at) / 1000];
        const cloudCores = (cloudCpu(cloud) - cloudAt) / seconds;
        const pgNow = await postgres?.figures();
        const groupsNow = await groupFigures(inst.httpPort);
        busy.push(
          `${Math.round(rate)}/s (${(sender.answers['503'] ?? 0) - shedAt} shed): cloud ${cloudCores.toFixed(2)}, generator ${((own.user + own.system - ownAt.user - ownAt.system) / 1e6 / seconds).toFixed(2)} cores` +
            (groupsAt && groupsNow ? `, ${describeGroups(groupsAt, groupsNow, seconds)}` : '') +
            (pgAt && pgNow ? `, PostgreSQL ${describePostgres(pgAt, pgNow)}` : ''),
        );
        return rate;
      };
      const before = await measured(measureMs);
      const rssBefore = cloud.rss();
      // The cloud's figures, asked for at each point and not waited for: an answer that waits behind
      // the overload's backlog must not take the time the recovery is measured in.
      const figures: [string, Promise<string>][] = [];
      const sample = (when: string) => {
        const f = cloudFigures(inst.httpPort);
        figures.push([when, f]);
        void f.then((text) => options.log(`${when}: ${text}`));
      };
      sample('before');
      const rate = before * FACTOR;
      options.log(
        `sustainable: ${before.toFixed(0)} readings/s; offering ${rate.toFixed(0)}/s for ${overloadMs} ms${pinned ? ` (${pinned})` : ''}`,
      );
      let peakRss = rssBefore;
      const sampler = setInterval(() => (peakRss = Math.max(peakRss, cloud.rss())), 100);
      const cpuAtStart = cpu();
      const overStart = performance.now();
      const cloudCpuAtStart = cloudCpu(cloud);
      const offered = await sender.openLoop(
        rate,
        overloadMs,
        options.full ? MAX_OPEN.full : MAX_OPEN.short,
        () => alive(cloud),
      );
      const used = cpu();
      const harnessCpu =
        (used.user + used.system - cpuAtStart.user - cpuAtStart.system) / 1e6 / offered.seconds;
      const cloudCpuShare = (cloudCpu(cloud) - cloudCpuAtStart) / offered.seconds;
      const overEnd = performance.now();
      sample('end of overload');
      const drained = await sender.drained(60_000);
      const recoveryMs = performance.now() - overEnd;
      sample('backlog answered');
      // The rate again, window after window, until it is back or BACK_WITHIN_MS passed (or, watched
      // longer, until WATCH_MS passed).
      let after = 0;
      let backMs: number | null = null;
      const windows: number[] = [];
      const backWithinMs = options.full ? BACK_WITHIN_MS.full : BACK_WITHIN_MS.short;
      const watchMs = Math.max(backWithinMs, WATCH_MS);
      let decided = 0;
      while (alive(cloud) && performance.now() - overEnd < watchMs) {
        const counts = performance.now() - overEnd < backWithinMs && backMs === null;
        const rate = await measured(windowMs);
        windows.push(Math.round(rate));
        if (!counts) continue;
        after = rate;
        decided = windows.length;
        if (rate >= before * recovered) {
          backMs = performance.now() - overEnd;
          if (watchMs === backWithinMs) break;
        }
      }
      clearInterval(sampler);
      peakRss = Math.max(peakRss, cloud.rss());
      sample('after');
      options.log(
        `offered ${offered.offered.toFixed(0)}/s (${(offered.offered / before).toFixed(1)}x), answered ${offered.answered.toFixed(0)}/s; after: ${after.toFixed(0)}/s; peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB`,
      );

      // A cloud that died (out of memory, say) has its stored readings read by a new one.
      const reader = alive(cloud) ? null : await startCloud(inst);
      const checked = check(sender.readings(), await storedKeys(inst));
      if (reader) await stopCloud(reader);
      const failed: string[] = [];
      if (!alive(cloud)) failed.push('the cloud died');
      // A connection the cloud closed for a read past twice HTTP_MAX_PIPELINED had its unanswered
      // requests refused without an answer (never acknowledged): what the bound is for. Any other
      // loss, or more losses than such closes, is a failure.
      const cuts = await cloudCounter(inst.httpPort, 'sm_http_connections_cut_total');
      const cutUnanswered =
        cuts !== null && sender.losses.length <= cuts
          ? sender.losses.reduce((n, l) => n + l.unanswered, 0)
          : 0;
      const unanswered = (sender.answers['no answer'] ?? 0) - cutUnanswered;
      if (!drained || unanswered > 0) failed.push(`${unanswered + sender.open} requests never answered`);
      if (peakRss > RSS_LIMIT) failed.push(`peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB over the limit`);
      if (backMs === null)
        failed.push(
          `throughput ${after.toFixed(0)}/s, not back to ${recovered * 100} % of ${before.toFixed(0)}/s within ${backWithinMs / 1000} s`,
        );
      const notes: ScenarioResult['notes'] = {
        'sustainable /s': Math.round(before),
        'offered /s': Math.round(offered.offered),
        'offered / sustainable': Math.round((offered.offered / before) * 10) / 10,
        'answered /s during': Math.round(offered.answered),
        'after /s': Math.round(after),
        'after, window by window /s':
          windows.slice(0, decided).join(' ') +
          (windows.length > decided ? ` (then ${windows.slice(decided).join(' ')})` : ''),
        'CPU while measured (before, then each window after)': busy.join('; '),
        'back to normal s': backMs === null ? 'no' : Math.round(backMs / 100) / 10,
        'RSS before MiB': Math.round(rssBefore / 2 ** 20),
        'peak RSS MiB': Math.round(peakRss / 2 ** 20),
        'not sent (generator at its open limit)': offered.notSent,
        'generator CPU (cores)': Math.round(harnessCpu * 100) / 100,
        'cloud CPU (cores)': Math.round(cloudCpuShare * 100) / 100,
        pinning: pinned ?? 'none',
        'cloud NODE_OPTIONS': CLOUD_NODE_OPTIONS || 'none',
        connections: CONNECTIONS,
        'load average': os
          .loadavg()
          .map((l) => l.toFixed(1))
          .join(' '),
        'error log lines': cloud.errors.count,
        'connections the cloud closed for a read past twice HTTP_MAX_PIPELINED': cuts ?? 'unknown',
        'requests unanswered on them': cutUnanswered,
      };
      for (const [when, f] of figures) notes[`cloud, ${when}`] = await f;
      notes['connections lost (s after the overload began: unanswered)'] =
        sender.losses
          .slice(0, 10)
          .map((l) => `${((l.at - overStart) / 1000).toFixed(1)}: ${l.unanswered}`)
          .join(', ') + (sender.losses.length > 10 ? `, ... (${sender.losses.length})` : '');
      for (const [what, n] of Object.entries(sender.answers).sort()) notes[what] = n;
      for (const [i, e] of sender.unexpected.slice(0, 3).entries()) notes[`example ${i + 1}`] = e;
      if (failed.length > 0) notes.failed = failed.join('; ');
      const code = await stopCloud(cloud);
      if (code !== 0)
        notes.failed = [notes.failed, `the cloud did not stop cleanly: exit ${code}`]
          .filter(Boolean)
          .join('; ');
      return {
        scenario: this.name,
        db: options.db,
        faults: 1,
        durationMs: Math.round(performance.now() - startedAt),
        sent: sender.sent,
        acknowledged: checked.acknowledged,
        stored: checked.stored,
        lost: checked.lost.length,
        duplicated: checked.duplicated.length,
        unexpected: checked.unexpected.length,
        http5xx: sender.unexpectedCount,
        recoveryMs: Math.round(recoveryMs),
        examples: {
          lost: checked.lost.slice(0, 20),
          duplicated: checked.duplicated.slice(0, 20),
          unexpected: checked.unexpected.slice(0, 20),
        },
        notes,
      };
    } finally {
      await postgres?.close();
      sender.close();
      if (cloud.child.exitCode === null) cloud.child.kill('SIGKILL');
      await cloud.exited;
      await unpin(pinned);
      await inst.dispose();
    }
  },
};

/** The cloud's `/metrics` text; null when the cloud does not answer within 10 s. */
async function metricsText(port: number): Promise<string | null> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(10_000) });
    return await res.text();
  } catch {
    return null;
  }
}

/** A metric's value in `/metrics` text, summed over its labels (0 when absent). */
function metricValue(text: string, name: string): number {
  return [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'gm'))].reduce(
    (sum, m) => sum + Number(m[1]),
    0,
  );
}

/** One counter of the cloud's `/metrics`; null when the cloud does not answer. */
async function cloudCounter(port: number, name: string): Promise<number | null> {
  const text = await metricsText(port);
  return text === null ? null : metricValue(text, name);
}

/**
 * The cloud's own figures from `/metrics`: its live heap, the time its garbage collector has taken
 * so far, the HTTP connections open, the requests it holds (read and not answered, and those
 * pipelined behind their connection's first), its pauses for pipelining and the connections it
 * closed for a read past twice the pipelining bound. Empty when the cloud does not answer.
 */
async function cloudFigures(port: number): Promise<string> {
  const text = await metricsText(port);
  if (text === null) return 'no figures (no answer)';
  const value = (name: string) => metricValue(text, name);
  return [
    `heap used ${(value('nodejs_heap_size_used_bytes') / 2 ** 20).toFixed(0)} MiB`,
    `GC ${value('nodejs_gc_duration_seconds_sum').toFixed(1)} s`,
    `connections ${value('sm_http_connections')}`,
    `held ${value('sm_http_requests_held')}`,
    `pipelined ${value('sm_http_requests_pipelined')}`,
    `pauses ${value('sm_http_pipelining_pauses_total')}`,
    `cut ${value('sm_http_connections_cut_total')}`,
  ].join(', ');
}

/**
 * The cloud's ingest groups so far (`sm_ingest_group_*`): how many, the requests in them, their
 * transactions' time; and the time its garbage collector has taken.
 */
interface GroupSnapshot {
  groups: number;
  items: number;
  seconds: number;
  gcSeconds: number;
}

/** The cloud's ingest group and GC figures from `/metrics`; null when the cloud does not answer. */
async function groupFigures(port: number): Promise<GroupSnapshot | null> {
  const text = await metricsText(port);
  if (text === null) return null;
  return {
    groups: metricValue(text, 'sm_ingest_group_items_count'),
    items: metricValue(text, 'sm_ingest_group_items_sum'),
    seconds: metricValue(text, 'sm_ingest_group_seconds_sum'),
    gcSeconds: metricValue(text, 'nodejs_gc_duration_seconds_sum'),
  };
}

/**
 * Ingest's groups between two snapshots: per second, their mean size and their transactions' mean
 * time, and the share of the window spent in them; and the garbage collector's share. Fewer requests
 * per group at the same rate of groups says fewer requests reached ingest; as many per group, each
 * taking longer, says the writes themselves slowed; fewer groups of the same size and time, that
 * something else took the core.
 */
function describeGroups(at: GroupSnapshot, now: GroupSnapshot, seconds: number): string {
  const groups = now.groups - at.groups;
  const time = now.seconds - at.seconds;
  const gc = `GC ${(((now.gcSeconds - at.gcSeconds) / seconds) * 100).toFixed(0)} %`;
  if (groups === 0) return `no ingest groups, ${gc}`;
  return `${(groups / seconds).toFixed(0)} groups/s of ${((now.items - at.items) / groups).toFixed(1)} requests, ${((time / groups) * 1000).toFixed(2)} ms each (${((time / seconds) * 100).toFixed(0)} % of the window), ${gc}`;
}

/** The server-wide figures of PostgreSQL that can slow its writes for a while (pg_stat_wal, pg_stat_bgwriter). */
interface PostgresSnapshot {
  walBytes: number;
  /** Full-page images written to the WAL: every page's first change after a checkpoint writes one. */
  fullPages: number;
  checkpoints: number;
  /** Autovacuum and autoanalyze workers running at the snapshot. */
  autovacuums: number;
}

/** Reads PostgreSQL's figures beside the cloud, on a connection of its own. */
class PostgresFigures {
  private constructor(private readonly client: pg.Client) {}

  static async open(url: string): Promise<PostgresFigures> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    return new PostgresFigures(client);
  }

  /** Undefined where the server has no such views (pg_stat_wal is 14+; 17 moved the checkpoint counts). */
  async figures(): Promise<PostgresSnapshot | undefined> {
    const rows = await this.client
      .query<Record<keyof PostgresSnapshot, string>>(
        `SELECT w.wal_bytes AS "walBytes", w.wal_fpi AS "fullPages",
                b.checkpoints_timed + b.checkpoints_req AS checkpoints,
                (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker') AS autovacuums
           FROM pg_stat_wal w, pg_stat_bgwriter b`,
      )
      .then(
        (r) => r.rows,
        () => [],
      );
    const row = rows[0];
    if (!row) return undefined;
    return {
      walBytes: Number(row.walBytes),
      fullPages: Number(row.fullPages),
      checkpoints: Number(row.checkpoints),
      autovacuums: Number(row.autovacuums),
    };
  }

  close(): Promise<void> {
    return this.client.end();
  }
}

/** What PostgreSQL did between two snapshots: WAL written, full-page images, checkpoints begun, autovacuum. */
function describePostgres(from: PostgresSnapshot, to: PostgresSnapshot): string {
  const checkpoints = to.checkpoints - from.checkpoints;
  return [
    `WAL ${((to.walBytes - from.walBytes) / 2 ** 20).toFixed(0)} MiB`,
    `${to.fullPages - from.fullPages} full pages`,
    ...(checkpoints > 0 ? [`${checkpoints} checkpoint(s)`] : []),
    ...(to.autovacuums > 0 ? [`${to.autovacuums} autovacuum worker(s)`] : []),
  ].join(', ');
}

function alive(cloud: CloudRun): boolean {
  return cloud.child.exitCode === null && cloud.child.signalCode === null;
}

/** The cloud process's CPU time so far, in seconds (user + system, from /proc). */
function cloudCpu(cloud: CloudRun): number {
  try {
    const fields = fs.readFileSync(`/proc/${cloud.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}
const CLOCK_TICKS = 100;

/** The CPUs this process may run on before `pin`, to give back. */
let ownCpus: string | null = null;

/**
 * With two or more cores: the cloud (all its threads) on the last core, this process on the others,
 * so that the generator does not take the cloud's CPU nor the cloud the generator's. Answers what it
 * did, or null where `taskset` is missing or there is one core.
 */
async function pin(cloud: CloudRun): Promise<string | null> {
  const cores = os.cpus().length;
  if (cores < 2 || process.env.CHAOS_PIN !== '1') return null;
  const last = cores - 1;
  const rest = last === 1 ? '0' : `0-${last - 1}`;
  try {
    ownCpus = (await run('taskset', ['-p', '-c', String(process.pid)])).stdout.split(': ')[1]!.trim();
    await run('taskset', ['-a', '-p', '-c', String(last), String(cloud.pid)]);
    await run('taskset', ['-a', '-p', '-c', rest, String(process.pid)]);
    return `cloud on CPU ${last}, generator on CPU ${rest}`;
  } catch {
    return null;
  }
}

async function unpin(pinned: string | null): Promise<void> {
  if (!pinned || !ownCpus) return;
  await run('taskset', ['-a', '-p', '-c', ownCpus, String(process.pid)]).catch(() => undefined);
}
