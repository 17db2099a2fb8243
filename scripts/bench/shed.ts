import pg from 'pg';
import {
  cpuMicros,
  median,
  roundKnobs,
  setUpAccount,
  startServer,
  tempDir,
  throwawayPostgres,
  type ServerProcess,
} from './lib.ts';
import { runPipelinedIngest } from './load.ts';

/**
 * How fast the cloud refuses: the chaos scenario `overload` offers ten times the rate the cloud can
 * store, and what reaches the cloud is what it can answer, 503s included (docs/reliability.md). This
 * measures that ceiling: the cloud held in its shedding state (PostgreSQL's ingest journal locked
 * with one ingest request pending, `INGEST_MAX_PENDING=1`, so every further device request is
 * answered 503 `overloaded` at the door), loaded with POST /v1/ingest from 50 devices, pipelined
 * 16 deep on 256 connections; the baseline is Node's own HTTP server answering the same 503 and
 * nothing else (`bare-shed.ts`), in the same rounds. Both are single processes.
 */
const DEVICES = 50;
const DEPTH = 16;
const CONNECTIONS = 256;

export interface ShedRow {
  target: string;
  /** Answers per second (all 503), the rounds' median, lowest and highest. */
  median: number;
  min: number;
  max: number;
  rounds: number[];
  /** The server's CPU over the rounds, % of one core. */
  serverCpuPercent: number;
  /** wrk's CPU over the rounds, % of one core (one thread: near 100 it was the limit). */
  generatorCpuPercent: number;
  /** Answers 2xx or 3xx: none, when every request is refused. */
  accepted: number;
}

export async function benchShed(postgresUrl: string | null): Promise<ShedRow[] | null> {
  if (!postgresUrl) return null;
  const { durationS, rounds } = roundKnobs(0);
  const database = await throwawayPostgres(postgresUrl);
  const dataDir = tempDir('bench-shed-');
  const servers: ServerProcess[] = [];
  const holder = new pg.Client({ connectionString: database.url });
  try {
    const cloud = await startServer('cloud/src/main.ts', {
      DATABASE_URL: database.url,
      DATA_DIR: dataDir,
      INGEST_MAX_PENDING: '1',
      // The production default: each request answered is an access-log line, if it is logged at all.
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
      RATE_LIMIT_INGEST_PER_MIN: '1000000000',
    });
    servers.push(cloud);
    const bare = await startServer('scripts/bench/bare-shed.ts', {});
    servers.push(bare);
    const account = await setUpAccount(cloud.url, dataDir, DEVICES);
    // The cloud's writes held: one request pending keeps it over INGEST_MAX_PENDING.
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE ingest_journal IN EXCLUSIVE MODE');
    const first = account.devices[0]!;
    const pending = fetch(`${cloud.url}/v1/ingest`, {
      method: 'POST',
      headers: { authorization: `Bearer ${first.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ device: first.localId, measurements: [{ type: 'temperature', value: 4 }] }),
    });
    for (let i = 0; ; i++) {
      const probe = await fetch(`${cloud.url}/v1/ingest`, {
        method: 'POST',
        headers: { authorization: `Bearer ${first.token}`, 'content-type': 'application/json' },
        body: '{}',
      });
      const code = ((await probe.json()) as { error?: { code?: string } }).error?.code;
      if (code === 'overloaded') break;
      if (i > 200) throw new Error(`the cloud does not shed: ${probe.status} ${code}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const targets = [
      { name: 'cloud, shedding (503 overloaded)', server: cloud },
      { name: 'bare Node HTTP, 503 only (baseline)', server: bare },
    ];
    const figures = targets.map(() => ({
      rates: [] as number[],
      server: 0,
      generator: 0,
      seconds: 0,
      accepted: 0,
    }));
    for (let round = 0; round < rounds; round++) {
      for (const [i, target] of targets.entries()) {
        const before = cpuMicros(target.server.pid);
        const r = await runPipelinedIngest(
          {
            url: target.server.url,
            wire: 'cloud',
            devices: account.devices,
            measurements: [{ type: 'temperature', value: 4, label: '' }],
            connections: CONNECTIONS,
            durationS,
          },
          DEPTH,
        );
        if (!r) return null;
        const f = figures[i]!;
        f.rates.push(r.answersPerSec);
        f.server += cpuMicros(target.server.pid) - before;
        f.generator += r.generatorCpuMicros;
        f.seconds += r.durationS;
        // `requestsPerSec` counts 2xx and 3xx answers only: none, while the target refuses all.
        f.accepted += r.requestsPerSec * r.durationS;
      }
    }
    await holder.query('ROLLBACK');
    await pending;
    return targets.map((t, i) => {
      const f = figures[i]!;
      return {
        target: t.name,
        median: median(f.rates),
        min: Math.min(...f.rates),
        max: Math.max(...f.rates),
        rounds: f.rates,
        serverCpuPercent: (f.server / 1e6 / f.seconds) * 100,
        generatorCpuPercent: (f.generator / 1e6 / f.seconds) * 100,
        accepted: Math.round(f.accepted),
      };
    });
  } finally {
    await holder.end().catch(() => undefined);
    for (const s of servers) await s.stop();
    await database.drop();
  }
}

export function shedTable(rows: ShedRow[]): [string[], (string | number)[][]] {
  const base = rows[rows.length - 1]!.median;
  return [
    ['target', '503 answers/s, median (min-max)', 'vs bare Node', 'server CPU %', 'wrk CPU %', '2xx answers'],
    rows.map((r) => [
      r.target,
      `${Math.round(r.median)} (${Math.round(r.min)}-${Math.round(r.max)})`,
      `${(r.median / base).toFixed(2)}x`,
      Math.round(r.serverCpuPercent),
      Math.round(r.generatorCpuPercent) + (r.generatorCpuPercent > 90 ? ' (the limit)' : ''),
      r.accepted,
    ]),
  ];
}
