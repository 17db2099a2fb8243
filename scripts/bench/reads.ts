import fs from 'node:fs';
import path from 'node:path';
import { PostgresIngestStore } from '../../cloud/src/ingest/ingest.store.postgres.ts';
import { SqliteIngestStore } from '../../cloud/src/ingest/ingest.store.sqlite.ts';
import type { IngestStore, MeasurementRow } from '../../cloud/src/ingest/ingest.types.ts';
import { SystemClock } from '../../cloud/src/clock.ts';
import { loadConfig } from '../../cloud/src/config.ts';
import { MeasurementsRepository } from '../../cloud/src/measurements/measurements.repository.ts';
import { MeasurementsService } from '../../cloud/src/measurements/measurements.service.ts';
import { rollupDeltas } from '../../cloud/src/measurements/rollups.ts';
import { decodeJournal, foldPoints } from '../../cloud/src/ingest/ingest.fold.ts';
import { openDatabase, type Database } from '../../cloud/src/storage/database.ts';
import { measurementGroup } from '../../cloud/src/storage/layout.ts';
import { runGetLoad } from './load.ts';
import {
  cpuMicros,
  median,
  memoryMiB,
  setUpAccount,
  startServer,
  tempDir,
  throwawayPostgres,
  type ServerProcess,
  roundKnobs,
} from './lib.ts';

/**
 * Read benchmark: one channel with a year of one-minute data (525,600 points), read over
 * the whole year at agg=1h and agg=1d through the API, against a plain GROUP BY over the raw rows
 * run on the same database in the same run. Then the account export of EXPORT_POINTS measurements,
 * watching the server's resident memory while the ZIP streams.
 *
 * Data is written with the ingest store's own statements (raw rows and rollups, as ingest writes
 * them) rather than through HTTP, which would take minutes for a year of single readings.
 */
const YEAR_POINTS = 525_600;
const MINUTE = 60_000_000;
const YEAR_START = Date.UTC(2025, 0, 1) * 1000;
const YEAR_END = YEAR_START + YEAR_POINTS * MINUTE;
const EXPORT_POINTS = Number(process.env.BENCH_EXPORT_POINTS ?? 5_000_000);
const EXPORT_CHANNELS = 32;

export interface ReadRow {
  target: string;
  read: string;
  medianMs: number;
  baselineMs: number | null;
  speedup: number | null;
  runs: number;
}

export interface ExportRow {
  target: string;
  measurements: number;
  zipMiB: number;
  seconds: number;
  rssBeforeMiB: number;
  rssPeakMiB: number;
  rssGrowthMiB: number;
}

async function timed(runs: number, work: () => Promise<unknown>): Promise<number> {
  await work(); // warm-up
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    await work();
    times.push(performance.now() - started);
  }
  return Math.round(median(times) * 100) / 100;
}

function storeFor(database: Database): IngestStore {
  if (database.sqlite) return new SqliteIngestStore(database.db, database.sqlite);
  return new PostgresIngestStore(database.pool!);
}

function triplets(rows: MeasurementRow[]): Float64Array {
  const out = new Float64Array(rows.length * 3);
  rows.forEach((r, i) => out.set([r.sensorSeq, r.ts, r.value], i * 3));
  return out;
}

/** Writes points as ingest does (raw rows, then rollups of the rows written), in big transactions. */
export async function load(
  database: Database,
  points: Iterable<MeasurementRow>,
  batch = 20_000,
): Promise<void> {
  const store = storeFor(database);
  let rows: MeasurementRow[] = [];
  const flush = async () => {
    const chunk = rows;
    rows = [];
    const points = triplets(chunk);
    let written: Uint8Array = new Uint8Array(0);
    await store.transaction(async (tx) => {
      written = await tx.insertMeasurements(points);
    });
    await store.fold(async (tx) => tx.upsertRollups(rollupDeltas(chunk.filter((_r, i) => written[i]))));
  };
  for (const p of points) {
    rows.push(p);
    if (rows.length >= batch) await flush();
  }
  if (rows.length) await flush();
}

/** `count` one-minute points from YEAR_START on each channel, minute by minute across them. */
export function* everyMinute(
  seqs: number[],
  count: number,
  value: (i: number) => number,
): Iterable<MeasurementRow> {
  for (let i = 0; i < count; i++)
    for (const sensorSeq of seqs) yield { sensorSeq, ts: YEAR_START + i * MINUTE, value: value(i) };
}

export async function ingestOnce(
  server: ServerProcess,
  device: { localId: string; token: string },
  labels: string[],
) {
  const response = await fetch(`${server.url}/v1/ingest`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${device.token}` },
    body: JSON.stringify({
      device: device.localId,
      ts: new Date(YEAR_START / 1000 - 60_000).toISOString(),
      measurements: labels.map((label) => ({ type: 'temperature', value: 4, label })),
    }),
  });
  const body = (await response.json()) as { channels: { channel_id: string }[] };
  return body.channels.map((c) => c.channel_id);
}

export async function seqOf(database: Database, channelId: string): Promise<number> {
  const row = await database.db
    .selectFrom('sensors')
    .select('seq')
    .where('channel_id', '=', channelId)
    .executeTakeFirstOrThrow();
  return row.seq;
}

export interface Target {
  name: string;
  setUp: (
    dataDir: string,
  ) => Promise<{ url: string; env: Record<string, string>; cleanup: () => Promise<void> }>;
}

/**
 * SQLite in the run's data directory, and PostgreSQL in a throwaway database when a URL is given;
 * `env` points a cloud process at it, `cleanup` drops the database and removes the directory.
 */
export function databaseTargets(postgresUrl: string | null): Target[] {
  const removeDir = (dataDir: string) => fs.rmSync(dataDir, { recursive: true, force: true });
  const targets: Target[] = [
    {
      name: 'SQLite',
      setUp: async (dataDir) => ({
        url: `sqlite:${path.join(dataDir, 'cloud.db')}`,
        env: {},
        cleanup: async () => removeDir(dataDir),
      }),
    },
  ];
  if (postgresUrl) {
    targets.push({
      name: 'PostgreSQL',
      setUp: async (dataDir) => {
        const db = await throwawayPostgres(postgresUrl);
        return {
          url: db.url,
          env: { DATABASE_URL: db.url },
          cleanup: async () => {
            await db.drop();
            removeDir(dataDir);
          },
        };
      },
    });
  }
  return targets;
}

/** A cloud process's environment in the read benchmarks: limits no run reaches. */
export function serverEnvFor(dataDir: string, env: Record<string, string>): Record<string, string> {
  return {
    DATA_DIR: dataDir,
    RATE_LIMIT_READ_PER_MIN: '1000000',
    RATE_LIMIT_MGMT_PER_MIN: '1000000',
    RATE_LIMIT_INGEST_PER_MIN: '1000000',
    ...env,
  };
}

export async function benchReads(
  postgresUrl: string | null,
): Promise<{ reads: ReadRow[]; exports: ExportRow[] }> {
  const targets = databaseTargets(postgresUrl);
  const reads: ReadRow[] = [];
  const exports: ExportRow[] = [];
  for (const target of targets) {
    const dataDir = tempDir('bench-reads-');
    const { url, env, cleanup } = await target.setUp(dataDir);
    const serverEnv = serverEnvFor(dataDir, env);
    try {
      // 1. An account, a device and its channels, made through the API.
      let server = await startServer('cloud/src/main.ts', serverEnv);
      const account = await setUpAccount(server.url, dataDir, 2);
      const [yearChannel] = await ingestOnce(server, account.devices[0]!, ['year']);
      const exportChannels = await ingestOnce(
        server,
        account.devices[1]!,
        Array.from({ length: EXPORT_CHANNELS }, (_, i) => `x${i}`),
      );
      await server.stop();

      // 2. A year of one-minute data on one channel, and the export's data on the others.
      const database = await openDatabase(url);
      const seq = await seqOf(database, yearChannel!);
      const started = performance.now();
      await load(
        database,
        (function* () {
          for (let i = 0; i < YEAR_POINTS; i++)
            yield { sensorSeq: seq, ts: YEAR_START + i * MINUTE, value: 4 + 3 * Math.sin(i / 720) };
        })(),
      );
      console.log(
        `${target.name}: loaded ${YEAR_POINTS} points in ${Math.round(performance.now() - started)} ms`,
      );
      // 3. Reads through the API against the plain GROUP BY on the same database.
      server = await startServer('cloud/src/main.ts', serverEnv);
      const range = `from=${encodeURIComponent(new Date(YEAR_START / 1000).toISOString())}&to=${encodeURIComponent(new Date(YEAR_END / 1000).toISOString())}`;
      const get = async (query: string, expectRows: number) => {
        const response = await fetch(
          `${server.url}/v1/channels/${yearChannel}/measurements?${query}&${range}`,
          {
            headers: { authorization: `Bearer ${account.token}` },
          },
        );
        const text = await response.text();
        if (response.status !== 200) throw new Error(`read ${query}: ${response.status} ${text}`);
        const rows = query.includes('format=csv')
          ? text.trim().split('\n').length - 1
          : (JSON.parse(text) as { data: unknown[] }).data.length;
        if (rows !== expectRows) throw new Error(`read ${query}: ${rows} rows, expected ${expectRows}`);
      };
      const plain = async (widthMicros: number, expectRows: number) => {
        const grp = measurementGroup(seq);
        const text = `SELECT (ts / ${widthMicros}) * ${widthMicros} AS bucket, avg(value) AS value FROM measurements
          WHERE grp = ${grp} AND sensor_seq = ${seq} AND ts >= ${YEAR_START} AND ts < ${YEAR_END}
          GROUP BY 1 ORDER BY 1`;
        const rows = database.sqlite
          ? database.sqlite.prepare(text).all()
          : (await database.pool!.query(text)).rows;
        if (rows.length !== expectRows) throw new Error(`plain: ${rows.length} rows, expected ${expectRows}`);
      };
      const days = 365;
      const hours = days * 24;
      const plainDay = await timed(5, () => plain(86_400_000_000, days));
      const plainHour = await timed(5, () => plain(3_600_000_000, hours));
      const cases: [string, string, number, number | null, number][] = [
        ['agg=1d fn=mean, JSON (one page)', 'agg=1d&limit=500', days, plainDay, 30],
        ['agg=1d fn=max, CSV (whole year)', 'agg=1d&fn=max&format=csv', days, plainDay, 30],
        ['agg=1h fn=mean, CSV (whole year)', 'agg=1h&format=csv', hours, plainHour, 15],
        ['agg=1h fn=mean, JSON (first page of 500)', 'agg=1h&limit=500', 500, null, 30],
        ['raw, JSON (first page of 500)', 'limit=500', 500, null, 30],
      ];
      for (const [read, query, expectRows, baselineMs, runs] of cases) {
        const medianMs = await timed(runs, () => get(query, expectRows));
        reads.push({
          target: target.name,
          read,
          medianMs,
          baselineMs,
          speedup: baselineMs === null ? null : Math.round((baselineMs / medianMs) * 10) / 10,
          runs,
        });
      }
      // The same answers computed in this process by the read service, without HTTP and encoding.
      const service = new MeasurementsService({
        db: database.db,
        clock: new SystemClock(),
        config: loadConfig({ RETENTION_DAYS: '3650' }),
        measurements: new MeasurementsRepository(),
      });
      const engine = async (width: number, expectRows: number) => {
        let rows = 0;
        for await (const chunk of service.stream(seq, { from: YEAR_START, to: YEAR_END, width, fn: 'mean' }))
          rows += chunk.length;
        if (rows !== expectRows) throw new Error(`engine: ${rows} rows, expected ${expectRows}`);
      };
      for (const [read, width, expectRows, baselineMs] of [
        ['read service in-process, agg=1d whole year', 86_400_000_000, days, plainDay],
        ['read service in-process, agg=1h whole year', 3_600_000_000, hours, plainHour],
      ] as const) {
        const medianMs = await timed(30, () => engine(width, expectRows));
        reads.push({
          target: target.name,
          read,
          medianMs,
          baselineMs,
          speedup: Math.round((baselineMs / medianMs) * 10) / 10,
          runs: 30,
        });
      }
      reads.push(
        {
          target: target.name,
          read: 'plain GROUP BY, 1d (baseline)',
          medianMs: plainDay,
          baselineMs: null,
          speedup: null,
          runs: 5,
        },
        {
          target: target.name,
          read: 'plain GROUP BY, 1h (baseline)',
          medianMs: plainHour,
          baselineMs: null,
          speedup: null,
          runs: 5,
        },
      );
      await server.stop();
      // The export's data only now: the read comparison above sees the one channel's year alone.
      const exportSeqs = await Promise.all(exportChannels.map((c) => seqOf(database, c)));
      const perChannel = Math.ceil(EXPORT_POINTS / EXPORT_CHANNELS);
      const exportStarted = performance.now();
      await load(
        database,
        everyMinute(exportSeqs, perChannel, (i) => (i % 1000) / 10),
      );
      console.log(
        `${target.name}: loaded ${perChannel * EXPORT_CHANNELS} export points in ${Math.round(performance.now() - exportStarted)} ms`,
      );
      await database.close();

      // 4. The account export on a fresh server, streamed to nowhere, its RSS sampled while it runs.
      server = await startServer('cloud/src/main.ts', serverEnv);
      await new Promise((resolve) => setTimeout(resolve, 1000)); // let start-up settle before the baseline
      const before = memoryMiB(server.pid).rss;
      let peak = before;
      const sampler = setInterval(() => (peak = Math.max(peak, memoryMiB(server.pid).rss)), 25);
      const exportStart = performance.now();
      const response = await fetch(`${server.url}/v1/accounts/me/export`, {
        method: 'POST',
        headers: { authorization: `Bearer ${account.token}` },
      });
      let bytes = 0;
      for await (const chunk of response.body!) bytes += (chunk as Uint8Array).length;
      clearInterval(sampler);
      peak = Math.max(peak, memoryMiB(server.pid).rss);
      exports.push({
        target: target.name,
        measurements: YEAR_POINTS + perChannel * EXPORT_CHANNELS + 1 + EXPORT_CHANNELS,
        zipMiB: Math.round(bytes / 1024 / 1024),
        seconds: Math.round((performance.now() - exportStart) / 100) / 10,
        rssBeforeMiB: before,
        rssPeakMiB: peak,
        rssGrowthMiB: peak - before,
      });
      await server.stop();
    } finally {
      await cleanup();
    }
  }
  return { reads, exports };
}

export interface ReadRateRound {
  requestsPerSec: number;
  /** Server CPU time (user + system) per request, µs; null for the in-process baseline. */
  cpuMicrosPerRequest: number | null;
  non2xx: number;
  errors: number;
}

export interface ReadRateRow {
  target: string;
  variant: string;
  medianPerSec: number;
  /** The rounds' median over the baseline's median, both of this run. */
  ratioToBaseline: number;
  /** The rounds' median over the per-request counter's median (the rate-limit change). */
  ratioToPerRequest: number | null;
  rounds: ReadRateRound[];
}

const RATE_DEVICES = 50;
const RATE_DAY_POINTS = 1440;
const { durationS: RATE_DURATION_S, rounds: RATE_ROUNDS, warmUpS: RATE_WARM_UP_S } = roundKnobs(3);
const RATE_CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);

/**
 * Read requests per second (issue "Live path", point 5): GET /v1/channels/{id}/measurements?agg=1h
 * over one day (24 buckets) of one-minute data, over 50 devices' channels in turn, from one account.
 * Two cloud processes on the same database take turns: one writes its read rate-limit counter on
 * every request (RATE_LIMIT_SYNC_MS=0, one committed upsert each), one counts in memory and writes in
 * batches (the default). The baseline is the plain GROUP BY over the same raw rows, one channel after
 * the other in this process, in the same rounds. Every round loads each in turn (the order rotates),
 * so the machine's drift falls on all of them; the table shows the median and every round.
 */
export async function benchReadRate(postgresUrl: string | null): Promise<ReadRateRow[]> {
  const rows: ReadRateRow[] = [];
  for (const target of databaseTargets(postgresUrl)) {
    const dataDir = tempDir('bench-read-rate-');
    const { url, env, cleanup } = await target.setUp(dataDir);
    const serverEnv = serverEnvFor(dataDir, env);
    const servers: ServerProcess[] = [];
    let database: Database | null = null;
    try {
      const perRequest = await startServer('cloud/src/main.ts', { ...serverEnv, RATE_LIMIT_SYNC_MS: '0' });
      servers.push(perRequest);
      const account = await setUpAccount(perRequest.url, dataDir, RATE_DEVICES);
      const channels: string[] = [];
      for (const device of account.devices) channels.push(...(await ingestOnce(perRequest, device, ['day'])));
      database = await openDatabase(url);
      const seqs = await Promise.all(channels.map((c) => seqOf(database!, c)));
      await load(
        database,
        everyMinute(seqs, RATE_DAY_POINTS, (i) => (i % 100) / 10),
      );
      const batched = await startServer('cloud/src/main.ts', serverEnv);
      servers.push(batched);
      const dayEnd = YEAR_START + RATE_DAY_POINTS * MINUTE;
      const range = `agg=1h&from=${encodeURIComponent(new Date(YEAR_START / 1000).toISOString())}&to=${encodeURIComponent(new Date(dayEnd / 1000).toISOString())}`;
      const paths = channels.map((c) => `/v1/channels/${c}/measurements?${range}`);
      const check = await fetch(`${batched.url}${paths[0]}`, {
        headers: { authorization: `Bearer ${account.token}` },
      });
      const points = ((await check.json()) as { data: unknown[] }).data.length;
      if (check.status !== 200 || points !== 24) throw new Error(`read: ${check.status}, ${points} points`);
      const db = database;
      const plainRound = async (durationS: number): Promise<ReadRateRound> => {
        const until = performance.now() + durationS * 1000;
        let done = 0;
        while (performance.now() < until) {
          const seq = seqs[done % seqs.length]!;
          const text = `SELECT (ts / 3600000000) * 3600000000 AS bucket, avg(value) AS value FROM measurements
            WHERE grp = ${measurementGroup(seq)} AND sensor_seq = ${seq} AND ts >= ${YEAR_START} AND ts < ${dayEnd}
            GROUP BY 1 ORDER BY 1`;
          const got = db.sqlite ? db.sqlite.prepare(text).all() : (await db.pool!.query(text)).rows;
          if (got.length !== 24) throw new Error(`plain: ${got.length} rows`);
          done++;
        }
        return { requestsPerSec: done / durationS, cpuMicrosPerRequest: null, non2xx: 0, errors: 0 };
      };
      const httpRound = (server: ServerProcess) => async (durationS: number) => {
        const cpuBefore = cpuMicros(server.pid);
        const r = await runGetLoad({
          url: server.url,
          paths,
          headers: { Authorization: `Bearer ${account.token}` },
          connections: RATE_CONNECTIONS,
          durationS,
        });
        const cpu = cpuMicros(server.pid) - cpuBefore;
        if (r.non2xx + r.errors > 0)
          console.log(`${target.name}: ${r.non2xx} non-2xx, ${r.errors} errors; log: ${server.logFile}`);
        return {
          requestsPerSec: r.requestsPerSec,
          cpuMicrosPerRequest: cpu / Math.max(1, r.requestsPerSec * durationS),
          non2xx: r.non2xx,
          errors: r.errors,
        };
      };
      const variants: [string, (durationS: number) => Promise<ReadRateRound>][] = [
        ['plain GROUP BY in the bench process (baseline)', plainRound],
        ['API, counter written per request (RATE_LIMIT_SYNC_MS=0)', httpRound(perRequest)],
        ['API, counters batched (default)', httpRound(batched)],
      ];
      for (const [, run] of variants) await run(RATE_WARM_UP_S);
      const rounds = variants.map((): ReadRateRound[] => []);
      for (let r = 0; r < RATE_ROUNDS; r++) {
        for (let k = 0; k < variants.length; k++) {
          const i = (r + k) % variants.length;
          rounds[i]!.push(await variants[i]![1](RATE_DURATION_S));
        }
      }
      const medians = rounds.map((done) => median(done.map((m) => m.requestsPerSec)));
      variants.forEach(([variant], i) => {
        rows.push({
          target: target.name,
          variant,
          medianPerSec: Math.round(medians[i]!),
          ratioToBaseline: Math.round((medians[i]! / medians[0]!) * 100) / 100,
          ratioToPerRequest: i === 0 ? null : Math.round((medians[i]! / medians[1]!) * 100) / 100,
          rounds: rounds[i]!,
        });
      });
    } finally {
      for (const server of servers) await server.stop();
      await database?.close();
      await cleanup();
    }
  }
  return rows;
}

export function readRateTable(rows: ReadRateRow[]): [string[], (string | number)[][]] {
  return [
    [
      'target',
      `GET /v1/channels/{id}/measurements?agg=1h (one day), ${RATE_DEVICES} devices, ${RATE_CONNECTIONS} connections`,
      'requests/s (median)',
      'rounds (requests/s)',
      'ratio to baseline',
      'ratio to per-request counter',
      'server CPU µs/request (median)',
      'non-2xx',
    ],
    rows.map((r) => {
      const cpu = r.rounds.map((m) => m.cpuMicrosPerRequest).filter((c): c is number => c !== null);
      return [
        r.target,
        r.variant,
        r.medianPerSec,
        r.rounds.map((m) => Math.round(m.requestsPerSec)).join(' '),
        r.ratioToBaseline,
        r.ratioToPerRequest ?? '',
        cpu.length ? Math.round(median(cpu)) : '',
        r.rounds.reduce((n, m) => n + m.non2xx + m.errors, 0),
      ];
    }),
  ];
}

export interface RollupCostRow {
  target: string;
  step: string;
  medianGroupMs: number;
  measurementsPerSec: number;
  overhead: string;
}

/**
 * What derived state costs ingest: the same ingest groups (100 requests × 32 measurements over
 * 1,600 channels, one second apart) committed with the store's own statements, with and without
 * the journal row, alternating in blocks on one database so both see the same table sizes; and the
 * fold of each journal block (rollups, last values, rule marker), per group, off the hot path.
 * HTTP is left out: it is the same for all and only adds noise (the wrk benchmark covers it).
 */
export async function benchRollupCost(postgresUrl: string | null): Promise<RollupCostRow[]> {
  const rows: RollupCostRow[] = [];
  const targets = databaseTargets(postgresUrl);
  const CHANNELS = 1600;
  const PER_GROUP = 3200;
  const BLOCKS = 10;
  const GROUPS_PER_BLOCK = 15;
  for (const target of targets) {
    const dataDir = tempDir('bench-rollup-cost-');
    const { url, cleanup } = await target.setUp(dataDir);
    const database = await openDatabase(url);
    const store = storeFor(database);
    try {
      // A group as 100 requests arrive: 50 devices of 32 channels, each request its own ts.
      let request = 0;
      const group = (): MeasurementRow[] => {
        const points: MeasurementRow[] = [];
        for (let r = 0; r < PER_GROUP / 32; r++, request++) {
          const device = request % (CHANNELS / 32);
          const ts = YEAR_START + request * 20_000;
          for (let c = 0; c < 32; c++)
            points.push({ sensorSeq: 1 + device * 32 + c, ts, value: ((request + c) % 1000) / 10 });
        }
        return points;
      };
      const times: Record<'raw' | 'journal' | 'fold', number[]> = { raw: [], journal: [], fold: [] };
      for (let block = 0; block < BLOCKS * 2; block++) {
        const mode = block % 2 === 0 ? 'raw' : 'journal';
        for (let g = 0; g < GROUPS_PER_BLOCK; g++) {
          const points = triplets(group());
          const started = performance.now();
          await store.transaction(async (tx) => {
            if (mode === 'raw') await tx.insertMeasurements(points);
            else await tx.write({ points, at: 0, devices: [], job: null });
          });
          times[mode].push(performance.now() - started);
        }
        if (mode === 'journal') {
          const started = performance.now();
          await store.fold(async (tx) => {
            const { deltas, lasts } = foldPoints((await tx.takeJournal(GROUPS_PER_BLOCK)).map(decodeJournal));
            await tx.upsertRollups(deltas);
            await tx.updateSensorLast(lasts);
          });
          times.fold.push((performance.now() - started) / GROUPS_PER_BLOCK);
        }
      }
      const raw = median(times.raw);
      const steps = {
        raw: 'measurements only',
        journal: 'measurements + journal (ingest)',
        fold: 'fold per group (background)',
      } as const;
      for (const mode of ['raw', 'journal', 'fold'] as const) {
        const ms = median(times[mode]);
        rows.push({
          target: target.name,
          step: steps[mode],
          medianGroupMs: Math.round(ms * 100) / 100,
          measurementsPerSec: Math.round((PER_GROUP / ms) * 1000),
          overhead: mode === 'raw' ? '' : `+${Math.round((ms / raw) * 100)}% of raw`,
        });
      }
    } finally {
      await database.close();
      await cleanup();
    }
  }
  return rows;
}

export function rollupCostTable(rows: RollupCostRow[]): [string[], (string | number)[][]] {
  return [
    [
      'target',
      'ingest group (3,200 measurements, 1,600 channels), one transaction',
      'median ms',
      'measurements/s',
      'cost',
    ],
    rows.map((r) => [r.target, r.step, r.medianGroupMs, r.measurementsPerSec, r.overhead]),
  ];
}

export function readsTable(rows: ReadRow[]): [string[], (string | number)[][]] {
  return [
    [
      'target',
      'read (one channel, 525,600 one-minute points, whole year)',
      'median ms',
      'plain GROUP BY ms',
      'times faster',
      'runs',
    ],
    rows.map((r) => [r.target, r.read, r.medianMs, r.baselineMs ?? '', r.speedup ?? '', r.runs]),
  ];
}

export function exportTable(rows: ExportRow[]): [string[], (string | number)[][]] {
  return [
    ['target', 'measurements', 'ZIP MiB', 'seconds', 'RSS before MiB', 'RSS peak MiB', 'RSS growth MiB'],
    rows.map((r) => [
      r.target,
      r.measurements,
      r.zipMiB,
      r.seconds,
      r.rssBeforeMiB,
      r.rssPeakMiB,
      r.rssGrowthMiB,
    ]),
  ];
}
