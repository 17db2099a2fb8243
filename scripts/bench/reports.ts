import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { openDatabase, type Database } from '../../cloud/src/storage/database.ts';
import { measurementGroup } from '../../cloud/src/storage/layout.ts';
import { median, memoryMiB, setUpAccount, startServer, tempDir } from './lib.ts';
import { databaseTargets, everyMinute, ingestOnce, load, seqOf, serverEnvFor } from './reads.ts';

/**
 * Report benchmark: `haccp_monthly` for 31 days × 50 channels of one-minute data (2,232,000
 * measurements) on each database, from `POST /v1/reports` to `state: ready`, with the server's
 * resident memory sampled while it renders. The baseline, measured in the same run on the same
 * database, is the bare query that reads every one of those rows once. `BENCH_ROUNDS` rounds (3)
 * alternate the baseline and a report; the table shows the median and the spread of each.
 *
 * Data is written with the ingest store's own statements (as `reads.ts` does), not through HTTP.
 */
const DEVICES = 5;
const CHANNELS_PER_DEVICE = 10;
const MINUTES = 31 * 1440;
const FROM = Date.UTC(2025, 0, 1) * 1000;
const TO = FROM + MINUTES * 60_000_000;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

export interface ReportRow {
  target: string;
  measurements: number;
  /** Median of the rounds. */
  readyMs: number;
  readyRoundsMs: number[];
  baselineRoundsMs: number[];
  pages: number;
  bytes: number;
  rssBeforeMiB: number;
  /** The largest of the rounds' growths. */
  rssGrowthMiB: number;
  growthRoundsMiB: number[];
  /** Median of the rounds. */
  baselineRawMs: number;
  /** The targets for the row: under 10 s (SQLite) or 20 s (PostgreSQL), under 200 MiB RSS growth. */
  verdict: string;
}

/** Reads every row of the period once, as plainly as each driver allows. */
async function rawScan(database: Database, groups: number[]): Promise<{ rows: number; ms: number }> {
  const text = `SELECT sensor_seq, ts, value FROM measurements WHERE grp = $1 AND ts >= $2 AND ts < $3`;
  const started = performance.now();
  let rows = 0;
  for (const grp of groups) {
    if (database.sqlite) {
      const statement = database.sqlite.prepare(text.replace(/\$\d/g, '?')).raw();
      for (const row of statement.iterate(grp, FROM, TO)) if (row) rows++;
    } else {
      const result = await database.pool!.query({ text, values: [grp, FROM, TO], rowMode: 'array' });
      rows += result.rows.length;
    }
  }
  return { rows, ms: Math.round(performance.now() - started) };
}

export async function benchReports(postgresUrl: string | null): Promise<ReportRow[]> {
  const out: ReportRow[] = [];
  for (const target of databaseTargets(postgresUrl)) {
    const dataDir = tempDir('bench-reports-');
    const { url, env, cleanup } = await target.setUp(dataDir);
    const serverEnv = serverEnvFor(dataDir, env);
    try {
      let server = await startServer('cloud/src/main.ts', serverEnv);
      const account = await setUpAccount(server.url, dataDir, DEVICES);
      const channels: string[] = [];
      for (const device of account.devices) {
        channels.push(
          ...(await ingestOnce(
            server,
            device,
            Array.from({ length: CHANNELS_PER_DEVICE }, (_, i) => `probe ${i}`),
          )),
        );
      }
      await server.stop();

      const database = await openDatabase(url);
      const seqs = await Promise.all(channels.map((c) => seqOf(database, c)));
      const loadStarted = performance.now();
      // A fridge's day: 2 to 6 °C with a few excursions above 8 °C.
      await load(
        database,
        everyMinute(seqs, MINUTES, (i) => 4 + 2 * Math.sin(i / 240) + (i % 7919 < 60 ? 5 : 0)),
      );
      const measurements = seqs.length * MINUTES;
      console.log(
        `${target.name}: loaded ${measurements} points in ${Math.round(performance.now() - loadStarted)} ms`,
      );
      const groups = [...new Set(seqs.map(measurementGroup))];
      await rawScan(database, groups); // warm-up: the same cache state the report meets

      server = await startServer('cloud/src/main.ts', { ...serverEnv, RATE_LIMIT_REPORT_PER_MIN: '100' });
      const auth = { authorization: `Bearer ${account.token}`, 'content-type': 'application/json' };
      // Data that arrives over a month is evaluated by the rule engine as it arrives; the data
      // loaded here is evaluated now, by reading the sensors (a read settles its channels), so the
      // report is timed as it runs in production rather than with a month's evaluation in it.
      for (const device of account.devices) {
        const r = await fetch(`${server.url}/v1/devices/${device.id}/sensors`, { headers: auth });
        if (r.status !== 200) throw new Error(`sensors of ${device.id}: ${r.status}`);
      }
      const readyRoundsMs: number[] = [];
      const growthRoundsMiB: number[] = [];
      const rssBefore = memoryMiB(server.pid).rss;
      const baselineRoundsMs: number[] = [];
      let pages = 0;
      let bytes = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const baseline = await rawScan(database, groups);
        if (baseline.rows !== measurements) throw new Error(`raw scan: ${baseline.rows} rows`);
        baselineRoundsMs.push(baseline.ms);
        // Each round's growth from its own start: the kernel's high-water mark is reset first
        // (proc(5), clear_refs "5"), so garbage a previous round left for later is not counted twice.
        fs.writeFileSync(`/proc/${server.pid}/clear_refs`, '5');
        const roundRss = memoryMiB(server.pid).rss;
        const started = performance.now();
        const created = await fetch(`${server.url}/v1/reports`, {
          method: 'POST',
          headers: auth,
          body: JSON.stringify({
            site_id: account.siteId,
            template: 'haccp_monthly',
            language: 'en',
            period: { from: new Date(FROM / 1000).toISOString(), to: new Date(TO / 1000).toISOString() },
          }),
        });
        const id = ((await created.json()) as { id: string }).id;
        let report: { state: string; error: string | null; size_bytes: number } | null = null;
        for (;;) {
          const r = await fetch(`${server.url}/v1/reports/${id}`, { headers: auth });
          report = (await r.json()) as typeof report;
          if (report!.state === 'ready' || report!.state === 'failed') break;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        readyRoundsMs.push(Math.round(performance.now() - started));
        growthRoundsMiB.push(server.peakRssMiB() - roundRss);
        if (report!.state !== 'ready') throw new Error(`report failed: ${report!.error}`);
        const file = path.join(dataDir, 'report.pdf');
        const pdf = await fetch(`${server.url}/v1/reports/${id}/file`, { headers: auth });
        fs.writeFileSync(file, Buffer.from(await pdf.arrayBuffer()));
        pages = Number(/^Pages:\s+(\d+)/m.exec(execFileSync('pdfinfo', [file]).toString())?.[1] ?? 0);
        bytes = report!.size_bytes;
      }
      await server.stop();
      await database.close();
      const readyMs = median(readyRoundsMs);
      const limitMs = target.name === 'SQLite' ? 10_000 : 20_000;
      const growth = Math.max(...growthRoundsMiB);
      out.push({
        target: target.name,
        measurements,
        readyMs,
        readyRoundsMs,
        baselineRoundsMs,
        pages,
        bytes,
        rssBeforeMiB: rssBefore,
        rssGrowthMiB: growth,
        growthRoundsMiB,
        baselineRawMs: median(baselineRoundsMs),
        verdict: [
          `time < ${limitMs / 1000} s ${readyMs < limitMs ? 'met' : 'NOT met'}`,
          `RSS growth < 200 MiB ${growth < 200 ? 'met' : 'NOT met'}`,
        ].join('; '),
      });
    } finally {
      await cleanup();
    }
  }
  return out;
}

export function reportsTable(rows: ReportRow[]): [string[], (string | number)[][]] {
  return [
    [
      'target',
      'measurements',
      'time to ready (s, median)',
      'rounds (s)',
      'raw read of all rows (s, baseline, median)',
      'baseline rounds (s)',
      'pages',
      'bytes',
      'RSS before (MiB)',
      'RSS growth (MiB, largest round)',
      'growth rounds (MiB)',
      'issue target',
    ],
    rows.map((r) => [
      r.target,
      r.measurements,
      (r.readyMs / 1000).toFixed(2),
      r.readyRoundsMs.map((ms) => (ms / 1000).toFixed(2)).join(' '),
      (r.baselineRawMs / 1000).toFixed(2),
      r.baselineRoundsMs.map((ms) => (ms / 1000).toFixed(2)).join(' '),
      r.pages,
      r.bytes,
      r.rssBeforeMiB,
      r.rssGrowthMiB,
      r.growthRoundsMiB.join(' '),
      r.verdict,
    ]),
  ];
}
