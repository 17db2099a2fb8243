import { influxd, startInfluxd } from './influx.ts';
import { runIngestLoad } from './load.ts';
import {
  cpuMicros,
  machineMeter,
  median,
  setUpAccount,
  startServer,
  tempDir,
  throwawayPostgres,
  type ServerProcess,
  roundKnobs,
} from './lib.ts';

/**
 * Ingest throughput: requests/s and measurements/s for 1 and 32 measurements per request
 * over keep-alive connections, on SQLite and PostgreSQL, against a bare Express route that parses
 * the same JSON and against InfluxDB 1.x (what a user would pick instead: the same measurements as
 * line protocol to its `/write`, from the same 50 devices; `influx.ts`), all measured in this run
 * (wrk, or autocannon without it).
 *
 * The targets run side by side and take turns: after a warm-up each, ROUNDS rounds in which every
 * target is loaded once (the order rotates). A target's requests/s is its best round, its CPU per
 * request the median. A shared machine's speed drifts by tens of per cent within a minute (steal
 * time, docs/benchmarks/README.md): measuring the targets one after the other turned that drift
 * into their ratios, and a median still took it in whenever two of a target's three rounds were slowed. Steal
 * time only ever slows a round down, so the best round is the nearest to what the code can do, and
 * every target gets the same number of tries. Beside the best, each row shows the rounds' median and
 * spread, and what limited it: the load generator (its one thread busy), the machine (no core idle)
 * or else the server.
 */
const { durationS: DURATION_S, rounds: ROUNDS, warmUpS: WARM_UP_S } = roundKnobs(3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const DEVICES = 50;
const KINDS = [
  'temperature',
  'humidity',
  'pressure',
  'co2',
  'voltage',
  'current',
  'power',
  'signal',
] as const;
const VALUES: Record<(typeof KINDS)[number], number> = {
  temperature: 4,
  humidity: 50,
  pressure: 1000,
  co2: 600,
  voltage: 230,
  current: 1,
  power: 100,
  signal: -70,
};

export interface IngestRound {
  generator: string;
  requestsPerSec: number;
  /** Server CPU time (user + system) per request, µs. */
  cpuMicrosPerRequest: number;
  /** Server CPU time over the round's time, % of one core (a process with threads can pass 100). */
  serverCpuPercent: number;
  /** The load generator's CPU time over the round's time, % of one core (wrk runs one thread). */
  generatorCpuPercent: number;
  /** Share of the machine's time its hypervisor gave to others during the round, %. */
  stealPercent: number;
  /** Share of the machine's time no process used during the round, %. */
  idlePercent: number;
  non2xx: number;
  errors: number;
}

export interface IngestRow {
  target: string;
  generator: string;
  perRequest: number;
  /** The best round's. */
  requestsPerSec: number;
  /** The rounds' median, lowest and highest. */
  medianRequestsPerSec: number;
  minRequestsPerSec: number;
  maxRequestsPerSec: number;
  measurementsPerSec: number;
  /** The rounds' median. */
  cpuMicrosPerRequest: number;
  ratioToBare: number | null;
  /** What held the rounds back (their medians): `load generator`, `machine` or `server`. */
  limit: string;
  /** The targets for this row and whether this run met them. */
  goal: string;
  non2xx: number;
  errors: number;
  peakRssMiB: number;
  rounds: IngestRound[];
}

interface Target {
  name: string;
  wire: 'cloud' | 'influx';
  server: ServerProcess;
  devices: { localId: string; token: string }[];
  cleanup: () => Promise<void>;
}

/** `n` measurements of the kinds in turn, labelled so that each is a channel of its own. */
export function measurements(n: number) {
  return Array.from({ length: n }, (_, i) => {
    const kind = KINDS[i % KINDS.length]!;
    return { type: kind, value: VALUES[kind], label: `m${Math.floor(i / KINDS.length)}` };
  });
}

async function run(target: Target, perRequest: number, durationS: number) {
  return runIngestLoad({
    url: target.server.url,
    wire: target.wire,
    devices: target.devices,
    measurements: measurements(perRequest),
    connections: CONNECTIONS,
    durationS,
  });
}

/**
 * Waits until the server's background work after a run (the fold, the rule engine's pass) is done,
 * so that it is not charged to the next target's round: its CPU time stays still for 100 ms.
 */
async function quiet(server: ServerProcess): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const before = cpuMicros(server.pid);
    await new Promise((resolve) => setTimeout(resolve, 100));
    if (cpuMicros(server.pid) - before < 5_000) return;
  }
}

async function measure(target: Target, perRequest: number): Promise<IngestRound> {
  const machine = machineMeter();
  const cpuBefore = cpuMicros(target.server.pid);
  const r = await run(target, perRequest, DURATION_S);
  const cpu = cpuMicros(target.server.pid) - cpuBefore;
  const { stealPercent, idlePercent } = machine();
  if (r.non2xx + r.errors > 0) {
    console.log(
      `${target.name}: ${r.non2xx} non-2xx, ${r.errors} errors; its log is ${target.server.logFile}`,
    );
  }
  await quiet(target.server);
  return {
    generator: r.generator,
    requestsPerSec: r.requestsPerSec,
    cpuMicrosPerRequest: cpu / Math.max(1, r.requestsPerSec * r.durationS),
    serverCpuPercent: cpu / (r.durationS * 10_000),
    generatorCpuPercent: r.generatorCpuMicros / (r.durationS * 10_000),
    stealPercent,
    idlePercent,
    non2xx: r.non2xx,
    errors: r.errors,
  };
}

async function cloudTarget(
  name: string,
  env: Record<string, string>,
  cleanup: () => Promise<void>,
): Promise<Target> {
  const dataDir = tempDir('bench-ingest-');
  let server: ServerProcess | null = null;
  try {
    server = await startServer('cloud/src/main.ts', {
      DATA_DIR: dataDir,
      RATE_LIMIT_INGEST_PER_MIN: '100000000',
      RATE_LIMIT_MGMT_PER_MIN: '100000',
      ...env,
    });
    const account = await setUpAccount(server.url, dataDir, DEVICES);
    return { name, wire: 'cloud', server, devices: account.devices, cleanup };
  } catch (err) {
    await server?.stop();
    await cleanup();
    throw err;
  }
}

const INFLUXDB = 'InfluxDB 1.6';

function goal(row: IngestRow, rows: IngestRow[], influxMissing: string | null): string {
  const verdict = (met: boolean) => (met ? 'met' : 'NOT met');
  /** `>= least of <other target>: ratio verdict`, on the best rounds' measurements/s. */
  const against = (target: string, least: number, label = target) => {
    const other = rows.find((r) => r.target === target && r.perRequest === row.perRequest);
    if (!other) return `>= ${least} of ${label}: not measured`;
    const ratio = Math.round((row.measurementsPerSec / other.measurementsPerSec) * 100) / 100;
    return `>= ${least} of ${label}: ${ratio} ${verdict(ratio >= least)}`;
  };
  // At 32 per request, against what a user would pick instead.
  const influx = (least: number) =>
    row.perRequest !== 32
      ? []
      : [
          influxMissing
            ? `>= ${least} of InfluxDB: not measured (${influxMissing})`
            : against(INFLUXDB, least, 'InfluxDB'),
        ];
  if (row.target === 'cloud on SQLite') {
    return [
      row.perRequest === 1
        ? `>= 0.40 of bare: ${verdict((row.ratioToBare ?? 0) >= 0.4)}`
        : `>= 100,000/s: ${verdict(row.measurementsPerSec >= 100_000)}`,
      ...influx(1.5),
    ].join('; ');
  }
  if (row.target === 'cloud on PostgreSQL') {
    return [against('cloud on SQLite', 0.5, 'SQLite'), ...influx(1)].join('; ');
  }
  return '';
}

/** What held a target's rounds back, from their medians. */
function limit(rounds: IngestRound[]): string {
  const generator = median(rounds.map((m) => m.generatorCpuPercent));
  const idle = median(rounds.map((m) => m.idlePercent));
  // wrk runs one thread: at 90 % of its core it is the bottleneck, whatever the server could do.
  if (generator >= 90) return 'load generator';
  if (idle < 5) return 'machine';
  return 'server';
}

export async function benchIngest(postgresUrl: string | null): Promise<IngestRow[]> {
  const targets: Target[] = [];
  try {
    const bare = await startServer('scripts/bench/bare-server.ts', {});
    targets.push({
      name: 'bare express',
      wire: 'cloud',
      server: bare,
      devices: [{ localId: 'x', token: 'x' }],
      cleanup: async () => undefined,
    });
    targets.push(await cloudTarget('cloud on SQLite', {}, async () => undefined));
    if (postgresUrl) {
      const db = await throwawayPostgres(postgresUrl);
      targets.push(await cloudTarget('cloud on PostgreSQL', { DATABASE_URL: db.url }, db.drop));
    }
    const found = influxd();
    if ('binary' in found) {
      targets.push({
        name: INFLUXDB,
        wire: 'influx',
        server: await startInfluxd(found.binary),
        // The cloud targets' devices by name: InfluxDB has no devices to make.
        devices: Array.from({ length: DEVICES }, (_, i) => ({ localId: `bench-${i}`, token: '' })),
        cleanup: async () => undefined,
      });
    } else {
      console.log(`${INFLUXDB}: not run, ${found.missing}`);
    }
    const influxMissing = 'missing' in found ? found.missing : null;

    const rows: IngestRow[] = [];
    for (const perRequest of [1, 32]) {
      // Unmeasured first: the figures are the sustained rate, not the first seconds of a process
      // (JIT compilation, every channel's creation, the rule engine's first look at each channel).
      for (const target of targets) {
        await run(target, perRequest, WARM_UP_S);
        await quiet(target.server);
      }
      const rounds = new Map<Target, IngestRound[]>(targets.map((t) => [t, []]));
      for (let r = 0; r < ROUNDS; r++) {
        for (let k = 0; k < targets.length; k++) {
          const target = targets[(r + k) % targets.length]!;
          rounds.get(target)!.push(await measure(target, perRequest));
        }
      }
      const bareRps = Math.max(...rounds.get(targets[0]!)!.map((m) => m.requestsPerSec));
      const sized: IngestRow[] = targets.map((target) => {
        const done = rounds.get(target)!;
        const each = done.map((m) => m.requestsPerSec);
        const rps = Math.max(...each);
        return {
          target: target.name,
          generator: done[0]!.generator,
          perRequest,
          requestsPerSec: Math.round(rps),
          medianRequestsPerSec: Math.round(median(each)),
          minRequestsPerSec: Math.round(Math.min(...each)),
          maxRequestsPerSec: Math.round(rps),
          measurementsPerSec: Math.round(rps * perRequest),
          cpuMicrosPerRequest: Math.round(median(done.map((m) => m.cpuMicrosPerRequest))),
          ratioToBare: Math.round((rps / bareRps) * 100) / 100,
          limit: limit(done),
          goal: '',
          non2xx: done.reduce((n, m) => n + m.non2xx, 0),
          errors: done.reduce((n, m) => n + m.errors, 0),
          peakRssMiB: target.server.peakRssMiB(),
          rounds: done,
        };
      });
      for (const row of sized) row.goal = goal(row, sized, influxMissing);
      rows.push(...sized);
    }
    return rows;
  } finally {
    for (const target of targets) {
      await target.server.stop();
      await target.cleanup();
    }
  }
}

export function ingestTable(rows: IngestRow[]): [string[], (string | number)[][]] {
  return [
    [
      'target',
      'load',
      'measurements/request',
      'requests/s (best round)',
      'median requests/s',
      'spread requests/s (min-max)',
      'rounds (requests/s)',
      'measurements/s',
      'ratio to bare',
      'issue target',
      'server CPU µs/request (median)',
      'CPU % of a core: server, load (median)',
      'limit',
      'steal %',
      'non-2xx',
      'errors',
      'peak RSS MiB',
    ],
    rows.map((r) => [
      r.target,
      r.generator,
      r.perRequest,
      r.requestsPerSec,
      r.medianRequestsPerSec,
      `${r.minRequestsPerSec}-${r.maxRequestsPerSec}`,
      r.rounds.map((m) => Math.round(m.requestsPerSec)).join(' '),
      r.measurementsPerSec,
      r.ratioToBare ?? '',
      r.goal,
      r.cpuMicrosPerRequest,
      `${Math.round(median(r.rounds.map((m) => m.serverCpuPercent)))}, ${Math.round(median(r.rounds.map((m) => m.generatorCpuPercent)))}`,
      r.limit,
      r.rounds.map((m) => Math.round(m.stealPercent)).join(' '),
      r.non2xx,
      r.errors,
      r.peakRssMiB,
    ]),
  ];
}
