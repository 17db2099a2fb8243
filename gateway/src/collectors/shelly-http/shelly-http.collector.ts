import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { timingSafeEqual } from 'node:crypto';
import { IngestValidationError } from '../../../../shared/ingest.ts';
import { parseShellyQuery, shellyBatteryMeasurement } from '../../../../shared/shelly.ts';
import type { CheckResult, Collector, CollectorDeps, IdentifyResult } from '../../collector.ts';
import type { ShellyHttpConfig } from '../../config.ts';
import { ReadingRefused, unsetClock } from '../../reading.ts';
import { checkListen } from '../listen-check.ts';

/** `Shelly/20230913-112531/v1.14.0-gcb84623 (SHHT-1)`: build, version, model code. */
const USER_AGENT = /^Shelly\/[^/\s]+\/(\S+)\s+\(([^)]+)\)/;
const MODEL_CODES: Record<string, string> = { 'SHHT-1': 'shelly-ht-gen1' };
const VOLT_MODELS = new Set(['shelly-ht-gen3']);

interface Answer {
  status: number;
  body: Record<string, unknown>;
  headers?: Record<string, string>;
}

function error(status: number, code: string, message: string): Answer {
  return { status, body: { error: { code, message } } };
}

/**
 * Shelly HTTP: a local listener for URL actions.
 *
 * - The Shelly H&T first generation's "report sensor values" action: `GET /?hum=89&temp=9.88&id=shellyht-EE45E9`
 *   (the device appends the query to whatever URL is configured; the path is ignored).
 * - The spec's `/v1/ingest/shelly` query (`device`, `temp`, `hum`, `battery`, `signal`, `ts`, `lwt`)
 *   exactly as the cloud accepts it (shared/shelly.ts), so a device configured with the cloud URL
 *   can be pointed at the gateway by changing only the host. Values that arrive as `nan`, `null` or
 *   an unexpanded template are dropped; `lwt` becomes the spec's last-will message upstream.
 *
 * The answer is 200 only once the reading is in the buffer; 503 when the buffer is full or failing
 * (the device retries on its next report); 400/422 with the cloud's error codes for invalid input.
 */
export class ShellyHttpCollector implements Collector {
  readonly name = 'shelly-http';
  private server: http.Server | null = null;
  private readonly seen = new Set<string>();

  constructor(private readonly deps: CollectorDeps & { config: ShellyHttpConfig }) {}

  /** The bound port (useful when the configuration says 0). */
  get port(): number {
    return (this.server?.address() as AddressInfo | null)?.port ?? 0;
  }

  async start(_signal: AbortSignal): Promise<void> {
    if (this.server) return;
    const server = http.createServer((req, res) => {
      this.handle(req).then(
        (answer) => {
          res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
          res.end(JSON.stringify(answer.body));
        },
        (err: unknown) => {
          this.deps.log.error({ err }, 'request failed');
          res.writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { code: 'internal', message: 'internal error' } }));
        },
      );
    });
    server.keepAliveTimeout = 5000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.deps.config.port, this.deps.config.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', (err) => {
      this.deps.counters.errors++;
      this.deps.log.error({ err }, 'listener error');
    });
    this.server = server;
    this.deps.counters.state = 'listening';
    this.deps.log.info({ host: this.deps.config.host, port: this.port }, 'listening for Shelly URL actions');
  }

  private async handle(req: http.IncomingMessage): Promise<Answer> {
    const { counters, log, clock, config, sink } = this.deps;
    counters.received++;
    if (req.method !== 'GET' && req.method !== 'POST') return error(405, 'method_not_allowed', 'use GET');
    const url = new URL(req.url ?? '/', 'http://gateway');
    const query: Record<string, string> = {};
    for (const [k, v] of url.searchParams) if (!(k in query)) query[k] = v;
    if (config.token !== undefined && !sameSecret(query.token ?? '', config.token)) {
      counters.invalid++;
      return error(401, 'token_invalid', 'the token does not match the gateway configuration');
    }
    // The first generation's report names the device `id`; the spec's query names it `device`.
    if (query.device === undefined && query.id !== undefined) query.device = query.id;
    const now = clock.nowMicros();
    // Before the query is judged: its `ts` would be judged against a clock that is not set.
    const unset = unsetClock(now);
    if (unset) {
      counters.refused++;
      log.warn({ device: query.device, code: unset.code }, 'reading not accepted: the clock is not set');
      return { ...error(503, unset.code, unset.message), headers: { 'retry-after': '60' } };
    }
    const ua = USER_AGENT.exec(req.headers['user-agent'] ?? '');
    let parsed;
    try {
      parsed = parseShellyQuery(query, now);
    } catch (err) {
      if (!(err instanceof IngestValidationError)) throw err;
      counters.invalid++;
      log.info({ device: query.device, code: err.code, reason: err.message }, 'Shelly report refused');
      return error(err.status, err.code, err.message);
    }
    const device = parsed.device;
    if (device === null) {
      counters.invalid++;
      return error(400, 'invalid_request', 'name the device with device= (or id= as the H&T sends it)');
    }
    const model = config.devices[device]?.model ?? (ua ? MODEL_CODES[ua[2]!] : undefined);
    const measurements = [...parsed.measurements];
    try {
      if (parsed.battery !== null) {
        measurements.push(shellyBatteryMeasurement(parsed.battery, VOLT_MODELS.has(model ?? '')));
      }
    } catch (err) {
      if (!(err instanceof IngestValidationError)) throw err;
      counters.invalid++;
      return error(err.status, err.code, err.message);
    }
    try {
      // Queued in this order within one commit: the info first, so that a device the cloud creates
      // on this message gets its model, then the reading, then the state.
      await Promise.all([
        model !== undefined ? sink.deviceInfo({ device, model, fw_version: ua?.[1] }) : null,
        measurements.length > 0 ? sink.accept({ device, ts: parsed.ts, measurements }) : null,
        parsed.lwt !== null
          ? sink.deviceState({ device, status: parsed.lwt, at: parsed.ts ?? now, reason: 'device last-will' })
          : null,
      ]);
    } catch (err) {
      if (!(err instanceof ReadingRefused)) throw err;
      if (err.code === 'invalid') {
        counters.invalid++;
        return error(400, 'invalid_request', err.message);
      }
      counters.refused++;
      log.warn({ device, code: err.code, err: err.message }, 'reading not accepted');
      return { ...error(503, err.code, err.message), headers: { 'retry-after': '60' } };
    }
    this.seen.add(device);
    counters.accepted++;
    log.debug({ device, measurements: measurements.length, lwt: parsed.lwt }, 'Shelly report buffered');
    return { status: 200, body: { accepted: measurements.length } };
  }

  owns(device: string): boolean {
    return this.seen.has(device);
  }

  /** A URL-action device only ever calls us; there is no way to reach it between its reports. */
  async identify(_device: string): Promise<IdentifyResult> {
    return 'unsupported';
  }

  async check(_signal: AbortSignal): Promise<CheckResult> {
    const { host, port } = this.deps.config;
    return checkListen(host, port, 'Shelly URL actions');
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    this.deps.counters.state = 'stopped';
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  }
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
