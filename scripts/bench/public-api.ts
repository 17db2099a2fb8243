import fs from 'node:fs';
import path from 'node:path';
import autocannon from 'autocannon';
import { newId } from '../../shared/ids.ts';
import { openDatabase } from '../../cloud/src/storage/database.ts';
import { cpuMicros, median, setUpAccount, startServer, tempDir, type ServerProcess } from './lib.ts';

/**
 * `GET /api/public/sensors?bbox=...` over 10,000 public pins on SQLite, against a bare Express
 * route answering the same pins from memory (scripts/bench/bare-public.ts), in the same run.
 * The pins (2,500 public devices of four kinds each, spread over Europe) are written straight into
 * the database; the load asks for VIEWPORTS map viewports of about 70 pins each, in turn, over
 * keep-alive connections (autocannon), so answers are served from the cloud's answer cache and
 * rebuilt whenever its pins expire (every 5 s). Rounds alternate between the two servers.
 */
const DEVICES = 2_500;
const KINDS = [
  ['temperature', '°C', 21],
  ['humidity', '%', 50],
  ['pressure', 'hPa', 1010],
  ['co2', 'ppm', 600],
] as const;
const VIEWPORTS = 50;
const CONNECTIONS = 10;
const ROUNDS = Number(process.env.BENCH_PUBLIC_ROUNDS ?? 5);
const DURATION_S = Number(process.env.BENCH_PUBLIC_SECONDS ?? 5);
const WARM_UP_S = 2;

export interface PublicApiRow {
  server: string;
  pins: number;
  pinsPerAnswer: number;
  /** Median over the rounds, and the lowest and highest round. */
  requestsPerSec: number;
  minRequestsPerSec: number;
  maxRequestsPerSec: number;
  /** p99 latency of each round's median, and the highest round's, ms. */
  p99Ms: number;
  maxP99Ms: number;
  cpuMicrosPerRequest: number;
  ratio: number;
  non2xx: number;
  errors: number;
}

interface Round {
  requestsPerSec: number;
  p99Ms: number;
  cpuMicrosPerRequest: number;
  non2xx: number;
  errors: number;
}

/** A seeded generator (mulberry32): the same pins and viewports in every run. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function round(server: ServerProcess, paths: string[], durationS: number): Promise<Round> {
  let i = 0;
  const cpuBefore = cpuMicros(server.pid);
  const result = await autocannon({
    url: server.url,
    connections: CONNECTIONS,
    duration: durationS,
    requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, path: paths[i++ % paths.length]! }) }],
  });
  const cpu = cpuMicros(server.pid) - cpuBefore;
  return {
    requestsPerSec: (result.requests.total - result.non2xx) / durationS,
    p99Ms: result.latency.p99,
    cpuMicrosPerRequest: cpu / Math.max(1, result.requests.total),
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

export async function benchPublicApi(): Promise<PublicApiRow[]> {
  const dataDir = tempDir('bench-public-');
  const servers: ServerProcess[] = [];
  try {
    const cloud = await startServer('cloud/src/main.ts', {
      DATA_DIR: dataDir,
      RATE_LIMIT_MGMT_PER_MIN: '1000000',
      // The limiter still counts every request (batched, as in production); it never refuses here.
      RATE_LIMIT_PUBLIC_PER_MIN: '1000000000',
    });
    servers.push(cloud);
    const account = await setUpAccount(cloud.url, dataDir, 0);
    const me = (await (
      await fetch(`${cloud.url}/v1/accounts/me`, { headers: { authorization: `Bearer ${account.token}` } })
    ).json()) as { id: string };

    // 10,000 pins written straight into the database, in one transaction.
    const rand = random(22);
    const database = await openDatabase(`sqlite:${path.join(dataDir, 'cloud.db')}`);
    const now = Date.now() * 1000;
    await database.db.transaction().execute(async (trx) => {
      for (let d = 0; d < DEVICES; d++) {
        const deviceId = newId('dev');
        await trx
          .insertInto('devices')
          .values({
            id: deviceId,
            account_id: me.id,
            site_id: account.siteId,
            local_id: `pin-${d}`,
            name: `Pin ${d}`,
            notes: '',
            model: 'http-generic',
            fw_version: null,
            token_hash: null,
            token_issued_at: now,
            last_seen_at: now,
            online: 1,
            created_at: now,
            deleted_at: null,
          })
          .execute();
        await trx
          .insertInto('public_devices')
          .values({
            device_id: deviceId,
            account_id: me.id,
            enabled: 1,
            nickname: `Station ${d}`,
            location_name: `Town ${d % 400}`,
            organisation: null,
            lat: 35 + rand() * 35,
            lon: -10 + rand() * 40,
            updated_at: now,
          })
          .execute();
        for (const [kind, unit, base] of KINDS) {
          await trx
            .insertInto('sensors')
            .values({
              id: newId('snr'),
              channel_id: newId('chn'),
              account_id: me.id,
              device_id: deviceId,
              kind,
              label: null,
              label_key: '',
              unit,
              ok_min: -1000,
              ok_max: 100000,
              grace_min: 0,
              rule_enabled: 0,
              no_data_min: 60,
              last_value: Math.round((base + rand() * 10) * 10) / 10,
              last_ts: now - Math.floor(rand() * 600_000_000),
              state: 'ok',
              created_at: now,
            })
            .execute();
        }
      }
      await trx
        .updateTable('public_epoch')
        .set((eb) => ({ epoch: eb('epoch', '+', 1) }))
        .execute();
    });
    await database.close();

    const all = (await (await fetch(`${cloud.url}/api/public/sensors`)).json()) as unknown[];
    if (all.length !== DEVICES * KINDS.length) throw new Error(`expected 10,000 pins, got ${all.length}`);
    const pinsFile = path.join(dataDir, 'pins.json');
    fs.writeFileSync(pinsFile, JSON.stringify(all));
    const bare = await startServer('scripts/bench/bare-public.ts', { PINS_FILE: pinsFile });
    servers.push(bare);

    // Viewports of 2.5° by 4° inside the pins' area: about 70 pins each.
    const paths = Array.from({ length: VIEWPORTS }, () => {
      const south = 35 + rand() * 32.5;
      const west = -10 + rand() * 36;
      return `/api/public/sensors?bbox=${south.toFixed(3)},${west.toFixed(3)},${(south + 2.5).toFixed(3)},${(west + 4).toFixed(3)}`;
    });
    let pinsPerAnswer = 0;
    for (const p of paths) {
      const [ours, theirs] = await Promise.all([fetch(cloud.url + p), fetch(bare.url + p)]);
      const a = (await ours.json()) as unknown[];
      const b = (await theirs.json()) as unknown[];
      if (ours.status !== 200 || a.length !== b.length)
        throw new Error(`${p}: ${a.length} vs ${b.length} pins`);
      pinsPerAnswer += a.length / paths.length;
    }

    const variants: [string, ServerProcess][] = [
      ['bare Express route, pins in memory (baseline)', bare],
      ['GET /api/public/sensors (cloud, SQLite)', cloud],
    ];
    for (const [, server] of variants) await round(server, paths, WARM_UP_S);
    const rounds = variants.map((): Round[] => []);
    for (let r = 0; r < ROUNDS; r++) {
      for (let k = 0; k < variants.length; k++) {
        const i = (r + k) % variants.length;
        rounds[i]!.push(await round(variants[i]![1], paths, DURATION_S));
      }
    }
    const baseline = median(rounds[0]!.map((x) => x.requestsPerSec));
    return variants.map(([name], i) => {
      const done = rounds[i]!;
      const rps = done.map((x) => x.requestsPerSec);
      return {
        server: name,
        pins: all.length,
        pinsPerAnswer: Math.round(pinsPerAnswer),
        requestsPerSec: Math.round(median(rps)),
        minRequestsPerSec: Math.round(Math.min(...rps)),
        maxRequestsPerSec: Math.round(Math.max(...rps)),
        p99Ms: median(done.map((x) => x.p99Ms)),
        maxP99Ms: Math.max(...done.map((x) => x.p99Ms)),
        cpuMicrosPerRequest: Math.round(median(done.map((x) => x.cpuMicrosPerRequest))),
        ratio: Math.round((median(rps) / baseline) * 100) / 100,
        non2xx: done.reduce((s, x) => s + x.non2xx, 0),
        errors: done.reduce((s, x) => s + x.errors, 0),
      };
    });
  } finally {
    for (const s of servers) await s.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

export function publicApiTable(rows: PublicApiRow[]): [string[], (string | number)[][]] {
  return [
    [
      'server',
      'pins',
      'pins/answer',
      'req/s (median)',
      'req/s (min-max)',
      'p99 ms (median, max)',
      'server CPU µs/req',
      'vs bare',
      'non-2xx/errors',
    ],
    rows.map((r) => [
      r.server,
      r.pins,
      r.pinsPerAnswer,
      r.requestsPerSec,
      `${r.minRequestsPerSec}-${r.maxRequestsPerSec}`,
      `${r.p99Ms}, ${r.maxP99Ms}`,
      r.cpuMicrosPerRequest,
      r.ratio,
      `${r.non2xx}/${r.errors}`,
    ]),
  ];
}
