import { runIngestLoad } from './load.ts';
import { setUpAccount, startServer, tempDir, throwawayPostgres, type ServerProcess } from './lib.ts';

/**
 * Ingest throughput (issue 3): requests/s and measurements/s for 1 and 32 measurements per request
 * over keep-alive connections, on SQLite and PostgreSQL, against a bare Express route that parses
 * the same JSON, all measured in this run (wrk, or autocannon without it).
 */
const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const WARM_UP_S = Number(process.env.BENCH_WARM_UP ?? 3);
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

export interface IngestRow {
  target: string;
  generator: string;
  perRequest: number;
  requestsPerSec: number;
  measurementsPerSec: number;
  ratioToBare: number | null;
  non2xx: number;
  errors: number;
  peakRssMiB: number;
}

function measurements(n: number) {
  return Array.from({ length: n }, (_, i) => {
    const kind = KINDS[i % KINDS.length]!;
    return { type: kind, value: VALUES[kind], label: `m${Math.floor(i / KINDS.length)}` };
  });
}

/**
 * One measured run, after a short unmeasured one of the same shape: the figures are the sustained
 * rate, not the first seconds of a process (JIT compilation, every channel's creation, the rule
 * engine's first look at each channel), for the bare route and the cloud alike.
 */
async function load(
  server: ServerProcess,
  perRequest: number,
  devices: { localId: string; token: string }[],
) {
  const run = (durationS: number) =>
    runIngestLoad({
      url: server.url,
      devices,
      measurementsJson: JSON.stringify(measurements(perRequest)),
      connections: CONNECTIONS,
      durationS,
    });
  await run(WARM_UP_S);
  return run(DURATION_S);
}

export async function benchIngest(postgresUrl: string | null): Promise<IngestRow[]> {
  const rows: IngestRow[] = [];
  const bare = await startServer('scripts/bench/bare-server.ts', {});
  const bareRps: Record<number, number> = {};
  for (const perRequest of [1, 32]) {
    const r = await load(bare, perRequest, [{ localId: 'x', token: 'x' }]);
    bareRps[perRequest] = r.requestsPerSec;
    rows.push({
      target: 'bare express',
      generator: r.generator,
      perRequest,
      requestsPerSec: Math.round(r.requestsPerSec),
      measurementsPerSec: Math.round(r.requestsPerSec * perRequest),
      ratioToBare: 1,
      non2xx: r.non2xx,
      errors: r.errors,
      peakRssMiB: bare.peakRssMiB(),
    });
  }
  await bare.stop();

  const targets: {
    name: string;
    env: () => Promise<{ env: Record<string, string>; cleanup: () => Promise<void> }>;
  }[] = [{ name: 'cloud on SQLite', env: async () => ({ env: {}, cleanup: async () => undefined }) }];
  if (postgresUrl) {
    targets.push({
      name: 'cloud on PostgreSQL',
      env: async () => {
        const db = await throwawayPostgres(postgresUrl);
        return { env: { DATABASE_URL: db.url }, cleanup: db.drop };
      },
    });
  }
  for (const target of targets) {
    const dataDir = tempDir('bench-ingest-');
    const { env, cleanup } = await target.env();
    const server = await startServer('cloud/src/main.ts', {
      DATA_DIR: dataDir,
      RATE_LIMIT_INGEST_PER_MIN: '100000000',
      RATE_LIMIT_MGMT_PER_MIN: '100000',
      ...env,
    });
    try {
      const account = await setUpAccount(server.url, dataDir, DEVICES);
      for (const perRequest of [1, 32]) {
        const r = await load(server, perRequest, account.devices);
        rows.push({
          target: target.name,
          generator: r.generator,
          perRequest,
          requestsPerSec: Math.round(r.requestsPerSec),
          measurementsPerSec: Math.round(r.requestsPerSec * perRequest),
          ratioToBare: Math.round((r.requestsPerSec / bareRps[perRequest]!) * 100) / 100,
          non2xx: r.non2xx,
          errors: r.errors,
          peakRssMiB: server.peakRssMiB(),
        });
      }
    } finally {
      await server.stop();
      await cleanup();
    }
  }
  return rows;
}

export function ingestTable(rows: IngestRow[]): [string[], (string | number)[][]] {
  return [
    [
      'target',
      'load',
      'measurements/request',
      'requests/s',
      'measurements/s',
      'ratio to bare',
      'non-2xx',
      'errors',
      'peak RSS MiB',
    ],
    rows.map((r) => [
      r.target,
      r.generator,
      r.perRequest,
      r.requestsPerSec,
      r.measurementsPerSec,
      r.ratioToBare ?? '',
      r.non2xx,
      r.errors,
      r.peakRssMiB,
    ]),
  ];
}
