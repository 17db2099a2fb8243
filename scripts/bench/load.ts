import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import autocannon from 'autocannon';
import { INFLUX_DATABASE } from './influx.ts';
import { childrenCpuMicros } from './lib.ts';

/**
 * Load generation for the HTTP benchmarks. wrk (Debian) is preferred: written in C, it leaves the
 * server most of a core on a 2-core machine. autocannon (npm) is the fallback when wrk is absent.
 * Each request carries a fresh timestamp, so none is a duplicate: every one is a real write. The
 * timestamps are current, as a device's are: a device's requests are STEP_MS apart from a minute
 * before the run starts, or from where the previous run against the same server stopped if that is
 * later (a fast run covers more than its own duration: at 180 requests/s per device, 1.8 s of
 * timestamps per second). Data a year old would keep the rule engine raising no-data alarms and
 * measure that instead of ingest.
 *
 * Two wires carry the same measurements: the cloud's `POST /v1/ingest` (JSON, the device's token)
 * and InfluxDB's `POST /write` (line protocol, microseconds: a line per measurement, the kind as
 * measurement, device and channel as tags, one field `value`). A body is its device's pieces joined
 * by the request's timestamp, so both generators build either wire the same way.
 */
export interface IngestLoad {
  url: string;
  wire: 'cloud' | 'influx';
  devices: { localId: string; token: string }[];
  measurements: { type: string; value: number; label: string }[];
  connections: number;
  durationS: number;
}

export interface LoadResult {
  generator: 'wrk' | 'autocannon';
  /** Requests answered 2xx (or 3xx) per second: a refusal or an error is no throughput. */
  requestsPerSec: number;
  /** How long the load ran, s. */
  durationS: number;
  /** CPU time the load generator used, µs. */
  generatorCpuMicros: number;
  non2xx: number;
  errors: number;
}

const exec = promisify(execFile);
const STEP_MS = 10;

interface Wire {
  path: string;
  headers: (device: { token: string }) => Record<string, string>;
  /** A device's body around its timestamps: `pieces.join(timestamp(ms))`. */
  pieces: (device: { localId: string }) => string[];
  /** The timestamp's piece for `ms` (epoch ms): in JS, and as a Lua expression of `ms`. */
  timestamp: { js: (ms: number) => string; lua: string };
}

function wireOf(load: IngestLoad): Wire {
  if (load.wire === 'influx') {
    return {
      path: `/write?db=${INFLUX_DATABASE}&precision=u`,
      headers: () => ({ 'Content-Type': 'text/plain; charset=utf-8' }),
      // Tags in key order (channel, device), as InfluxDB stores them; the last piece ends the body.
      pieces: (device) => [
        ...load.measurements.map(
          (m) => `${m.type},channel=${m.label},device=${device.localId} value=${m.value} `,
        ),
        '',
      ],
      timestamp: { js: (ms) => `${ms * 1000}\n`, lua: 'string.format("%.0f\\n", ms * 1000)' },
    };
  }
  const measurements = JSON.stringify(load.measurements);
  return {
    path: '/v1/ingest',
    headers: (device) => ({ 'Content-Type': 'application/json', Authorization: `Bearer ${device.token}` }),
    pieces: (device) => [`{"device":"${device.localId}","ts":"`, `","measurements":${measurements}}`],
    timestamp: {
      js: (ms) => new Date(ms).toISOString(),
      lua: 'os.date("!%Y-%m-%dT%H:%M:%S", math.floor(ms / 1000)) .. string.format(".%03dZ", ms % 1000)',
    },
  };
}

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

/** A Lua string literal of `s` (printable text: JSON's escapes of quotes and backslashes are Lua's). */
const lua = (s: string) => JSON.stringify(s);

/** A Lua table literal of HTTP headers, as `wrk.format` takes them. */
const luaHeaders = (headers: Record<string, string>) =>
  `{ ${Object.entries(headers)
    .map(([k, v]) => `[${lua(k)}] = ${lua(v)}`)
    .join(', ')} }`;

async function runWrk(load: IngestLoad): Promise<LoadResult> {
  const base = baseMs(load);
  const wire = wireOf(load);
  const script = `
local devices = { ${load.devices
    .map(
      (d) =>
        `{ pieces = { ${wire.pieces(d).map(lua).join(', ')} }, headers = ${luaHeaders(wire.headers(d))} }`,
    )
    .join(',\n')} }
local counter = 0
local base = ${base}
request = function()
  counter = counter + 1
  local d = devices[(counter % #devices) + 1]
  local ms = base + math.floor(counter / #devices) * ${STEP_MS}
  return wrk.format("POST", ${lua(wire.path)}, d.headers, table.concat(d.pieces, ${wire.timestamp.lua}))
end
`;
  const r = await execWrk(script, load.url, load.connections, load.durationS);
  usedUp(load, base, r.requests + load.connections); // and those still in flight when wrk stopped
  return { generator: 'wrk', ...r };
}

/**
 * Runs wrk with a Lua script (its `request` function; the `done` that prints the figures is added
 * here) and answers its figures and the CPU it used.
 */
async function execWrk(
  lua: string,
  url: string,
  connections: number,
  durationS: number,
  args: string[] = [],
): Promise<Omit<LoadResult, 'generator'> & { requests: number }> {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'wrk-')), 'load.lua');
  fs.writeFileSync(
    file,
    `${lua}
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %d\\n", summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout))
end
`,
  );
  // One thread: the script's counter is one sequence (unique ingest timestamps); epoll drives every connection.
  const cpuBefore = childrenCpuMicros();
  const { stdout } = await exec(
    'wrk',
    ['-t1', `-c${connections}`, `-d${durationS}s`, ...args, '-s', file, url],
    {
      maxBuffer: 1 << 20,
    },
  );
  const generatorCpuMicros = childrenCpuMicros() - cpuBefore;
  fs.rmSync(path.dirname(file), { recursive: true, force: true });
  const m = /RESULT (\d+) (\d+) (\d+) (\d+)/.exec(stdout);
  if (!m) throw new Error(`wrk printed no result:\n${stdout}`);
  const [requests, durationUs, non2xx, errors] = m.slice(1).map(Number) as [number, number, number, number];
  return {
    requests,
    requestsPerSec: (requests - non2xx) / (durationUs / 1e6),
    durationS: durationUs / 1e6,
    generatorCpuMicros,
    non2xx,
    errors,
  };
}

/**
 * Ingest load pipelined `depth` deep on each connection (wrk's own way: one `request` returns
 * `depth` requests, and the next goes once all their answers are in), each request of a device in
 * turn. wrk only: answers null without it. Every answer counts here, 2xx or not (`answersPerSec`):
 * what is measured is how fast a server answers, as when it refuses under overload.
 */
export async function runPipelinedIngest(
  load: IngestLoad,
  depth: number,
): Promise<(LoadResult & { answersPerSec: number }) | null> {
  if (!hasWrk()) return null;
  const wire = wireOf(load);
  const ms = baseMs(load);
  // Enough pipelines that every device sends: pipeline k holds devices k*depth .. k*depth+depth-1.
  const pipelines = Array.from({ length: Math.ceil(load.devices.length / depth) }, (_, k) =>
    Array.from({ length: depth }, (_, i) => {
      const d = load.devices[(k * depth + i) % load.devices.length]!;
      return `wrk.format("POST", ${lua(wire.path)}, ${luaHeaders(wire.headers(d))}, ${lua(wire.pieces(d).join(wire.timestamp.js(ms)))})`;
    }),
  );
  // Formatted in `init`: before it wrk has not set the Host header `wrk.format` adds.
  const script = `
local pipelines = {}
init = function(args)
  pipelines = { ${pipelines.map((p) => `table.concat({ ${p.join(', ')} })`).join(',\n')} }
end
local counter = 0
request = function()
  counter = counter + 1
  return pipelines[(counter % #pipelines) + 1]
end
`;
  const r = await execWrk(script, load.url, load.connections, load.durationS, ['--timeout', '20s']);
  return { generator: 'wrk', ...r, answersPerSec: r.requests / r.durationS };
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
    const script = `
local paths = { ${load.paths.map(lua).join(', ')} }
local headers = ${luaHeaders(load.headers)}
local counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", paths[(counter % #paths) + 1], headers)
end`;
    // A slow answer on a busy machine is counted late, not as a timeout error (wrk's default is 2 s).
    const r = await execWrk(script, load.url, load.connections, load.durationS, ['--timeout', '20s']);
    return { generator: 'wrk', ...r };
  }
  let seq = 0;
  return execAutocannon(load, {
    method: 'GET',
    setupRequest: (req) => ({ ...req, path: load.paths[seq++ % load.paths.length]!, headers: load.headers }),
  });
}

/** Runs autocannon with one request definition; answers its figures and the CPU it used. */
async function execAutocannon(
  load: { url: string; connections: number; durationS: number },
  request: autocannon.Request,
): Promise<LoadResult> {
  const cpuBefore = process.cpuUsage();
  const result = await autocannon({
    url: load.url,
    connections: load.connections,
    duration: load.durationS,
    requests: [request],
  });
  const cpu = process.cpuUsage(cpuBefore);
  return {
    generator: 'autocannon',
    requestsPerSec: (result.requests.total - result.non2xx) / load.durationS,
    durationS: load.durationS,
    generatorCpuMicros: cpu.user + cpu.system,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

async function runAutocannon(load: IngestLoad): Promise<LoadResult> {
  let seq = 0;
  const base = baseMs(load);
  const wire = wireOf(load);
  const devices = load.devices.map((d) => ({ pieces: wire.pieces(d), headers: wire.headers(d) }));
  const result = await execAutocannon(load, {
    method: 'POST',
    path: wire.path,
    setupRequest: (req) => {
      const n = seq++;
      const device = devices[n % devices.length]!;
      const ms = base + Math.floor(n / devices.length) * STEP_MS;
      return { ...req, headers: device.headers, body: device.pieces.join(wire.timestamp.js(ms)) };
    },
  });
  usedUp(load, base, seq);
  return result;
}
