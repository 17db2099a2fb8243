import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import autocannon from 'autocannon';

/**
 * Load generation for the HTTP benchmarks. wrk (Debian) is preferred: written in C, it leaves the
 * server most of a core on a 2-core machine. autocannon (npm) is the fallback when wrk is absent.
 * Each request carries a fresh timestamp, so none is a duplicate: every one is a real write. The
 * timestamps are current, as a device's are: a device's requests are STEP_MS apart from a minute
 * before the run starts, or from where the previous run against the same server stopped if that is
 * later (a fast run covers more than its own duration: at 180 requests/s per device, 1.8 s of
 * timestamps per second). Data a year old would keep the rule engine raising no-data alarms and
 * measure that instead of ingest.
 */
export interface IngestLoad {
  url: string;
  devices: { localId: string; token: string }[];
  /** The `measurements` array, as JSON. */
  measurementsJson: string;
  connections: number;
  durationS: number;
}

export interface LoadResult {
  generator: 'wrk' | 'autocannon';
  requestsPerSec: number;
  non2xx: number;
  errors: number;
}

const exec = promisify(execFile);
const STEP_MS = 10;

/** Per server: the first timestamp no run has used yet. */
const nextBase = new Map<string, number>();

function baseMs(load: IngestLoad): number {
  return Math.max(Date.now() - 60_000, nextBase.get(load.url) ?? 0);
}

/** After a run of `requests` from `base`: its timestamps are used up. */
function usedUp(load: IngestLoad, base: number, requests: number): void {
  nextBase.set(load.url, base + (Math.floor(requests / load.devices.length) + 1) * STEP_MS);
}

function hasWrk(): boolean {
  return (process.env.PATH ?? '').split(':').some((dir) => fs.existsSync(path.join(dir, 'wrk')));
}

export async function runIngestLoad(load: IngestLoad): Promise<LoadResult> {
  return hasWrk() && process.env.BENCH_GENERATOR !== 'autocannon' ? runWrk(load) : runAutocannon(load);
}

async function runWrk(load: IngestLoad): Promise<LoadResult> {
  const base = baseMs(load);
  const lua = `
local devices = { ${load.devices.map((d) => `{"${d.localId}", "${d.token}"}`).join(', ')} }
local measurements = '${load.measurementsJson}'
local counter = 0
local base = ${base}
request = function()
  counter = counter + 1
  local d = devices[(counter % #devices) + 1]
  local ms = base + math.floor(counter / #devices) * ${STEP_MS}
  local ts = os.date("!%Y-%m-%dT%H:%M:%S", math.floor(ms / 1000)) .. string.format(".%03dZ", ms % 1000)
  local body = '{"device":"' .. d[1] .. '","ts":"' .. ts .. '","measurements":' .. measurements .. '}'
  return wrk.format("POST", "/v1/ingest", { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. d[2] }, body)
end`;
  const r = await execWrk(lua, load.url, load.connections, load.durationS);
  usedUp(load, base, r.requests + load.connections); // and those still in flight when wrk stopped
  return { generator: 'wrk', requestsPerSec: r.requestsPerSec, non2xx: r.non2xx, errors: r.errors };
}

/** Runs wrk with a Lua script whose `done` prints the RESULT line below; answers its figures. */
async function execWrk(
  lua: string,
  url: string,
  connections: number,
  durationS: number,
  args: string[] = [],
) {
  const script = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'wrk-')), 'load.lua');
  fs.writeFileSync(
    script,
    `${lua}
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %d\\n", summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout))
end
`,
  );
  // One thread: the script's counter is one sequence (unique ingest timestamps); epoll drives every connection.
  const { stdout } = await exec(
    'wrk',
    ['-t1', `-c${connections}`, `-d${durationS}s`, ...args, '-s', script, url],
    {
      maxBuffer: 1 << 20,
    },
  );
  const m = /RESULT (\d+) (\d+) (\d+) (\d+)/.exec(stdout);
  if (!m) throw new Error(`wrk printed no result:\n${stdout}`);
  const [requests, durationUs, non2xx, errors] = m.slice(1).map(Number) as [number, number, number, number];
  return { requests, requestsPerSec: requests / (durationUs / 1e6), non2xx, errors };
}

/** GET load: the paths in turn over keep-alive connections, with the same headers on each. */
export interface GetLoad {
  url: string;
  paths: string[];
  headers: Record<string, string>;
  connections: number;
  durationS: number;
}

export async function runGetLoad(load: GetLoad): Promise<LoadResult> {
  if (hasWrk() && process.env.BENCH_GENERATOR !== 'autocannon') {
    const lua = `
local paths = { ${load.paths.map((p) => `"${p}"`).join(', ')} }
local headers = { ${Object.entries(load.headers)
      .map(([k, v]) => `["${k}"] = "${v}"`)
      .join(', ')} }
local counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", paths[(counter % #paths) + 1], headers)
end`;
    // A slow answer on a busy machine is counted late, not as a timeout error (wrk's default is 2 s).
    const r = await execWrk(lua, load.url, load.connections, load.durationS, ['--timeout', '20s']);
    return { generator: 'wrk', requestsPerSec: r.requestsPerSec, non2xx: r.non2xx, errors: r.errors };
  }
  let seq = 0;
  const result = await autocannon({
    url: load.url,
    connections: load.connections,
    duration: load.durationS,
    requests: [
      {
        method: 'GET',
        setupRequest: (req) => ({
          ...req,
          path: load.paths[seq++ % load.paths.length]!,
          headers: load.headers,
        }),
      },
    ],
  });
  return {
    generator: 'autocannon',
    requestsPerSec: result.requests.total / load.durationS,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

async function runAutocannon(load: IngestLoad): Promise<LoadResult> {
  let seq = 0;
  const base = baseMs(load);
  const result = await autocannon({
    url: load.url,
    connections: load.connections,
    duration: load.durationS,
    requests: [
      {
        method: 'POST',
        path: '/v1/ingest',
        setupRequest: (req) => {
          const n = seq++;
          const device = load.devices[n % load.devices.length]!;
          const ts = new Date(base + Math.floor(n / load.devices.length) * STEP_MS).toISOString();
          return {
            ...req,
            headers: { 'content-type': 'application/json', authorization: `Bearer ${device.token}` },
            body: `{"device":"${device.localId}","ts":"${ts}","measurements":${load.measurementsJson}}`,
          };
        },
      },
    ],
  });
  usedUp(load, base, seq);
  return {
    generator: 'autocannon',
    requestsPerSec: result.requests.total / load.durationS,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}
