import type { Logger } from '../logger.ts';

/**
 * What an outage refused: an HTTP request (503 `db_unavailable`), an MQTT publish (PUBACK 0x80), an
 * MQTT connection (CONNACK "server unavailable"), or a run of background work (the job queue's
 * claim), which is retried on its own.
 */
export type RefusedWork = 'request' | 'publish' | 'connection' | 'background';

/** The debug line of each refusal. */
const REFUSAL_LINE: Record<RefusedWork, string> = {
  request: 'request refused: database unavailable',
  publish: 'publish refused: database unavailable',
  connection: 'MQTT connection refused: database unavailable',
  background: 'background run failed: database unavailable',
};

const COUNT_FIELD: Record<RefusedWork, string> = {
  request: 'refused_requests',
  publish: 'refused_publishes',
  connection: 'refused_connections',
  background: 'failed_background_runs',
};

export interface DatabaseOutageLogDeps {
  log: Logger;
  /** One round trip to the database (`SELECT 1`): resolves when it answers. */
  probe: () => Promise<unknown>;
  /** How often the probe runs while the database is down. */
  probeMs?: number;
  /** How often an outage that lasts is logged again, with the counts so far. */
  reminderMs?: number;
  /** Milliseconds on a monotonic clock (default `performance.now()`). */
  now?: () => number;
}

interface Outage {
  since: number;
  lastReminder: number;
  refused: Record<RefusedWork, number>;
  timer: NodeJS.Timeout | null;
}

/** Default probe interval: a database restart takes seconds, so the end is logged within one. */
export const OUTAGE_PROBE_MS = 1000;
/** Default interval of the "still unavailable" line during a long outage. */
export const OUTAGE_REMINDER_MS = 60_000;

/**
 * A database outage in the log as one line when it starts and one when it ends, not one line per
 * refused request: during an outage every request and publish that needs the database is refused,
 * and a line at error level for each (thousands a minute under load) would bury everything else.
 *
 * The first refusal logs `database unavailable` at error level (with the error that showed it) and
 * starts a probe (`SELECT 1` every OUTAGE_PROBE_MS); the first probe that answers logs
 * `database available again` at warn level with how long it was down and how many requests,
 * publishes, MQTT connections and background runs were refused meanwhile. An outage longer than OUTAGE_REMINDER_MS is logged again at
 * warn level that often, with the counts so far. Each refusal itself is logged at debug level; the
 * access log keeps its line (status 503) for every refused request.
 */
export class DatabaseOutageLog {
  private outage: Outage | null = null;
  private stopped = false;

  constructor(private readonly deps: DatabaseOutageLogDeps) {}

  /** True from the first refusal until the probe gets an answer. */
  get down(): boolean {
    return this.outage !== null;
  }

  /** Work refused because the database did not answer (`err`: what showed it). */
  refused(work: RefusedWork, err: unknown, context: Record<string, unknown> = {}): void {
    let outage = this.outage;
    if (!outage) {
      const now = this.now();
      outage = this.outage = {
        since: now,
        lastReminder: now,
        refused: { request: 0, publish: 0, connection: 0, background: 0 },
        timer: null,
      };
      this.deps.log.error(
        { err, ...context },
        'database unavailable: requests answered 503 db_unavailable and publishes PUBACK 0x80 until it answers again',
      );
      this.scheduleProbe(outage);
    }
    outage.refused[work]++;
    this.deps.log.debug({ err, ...context }, REFUSAL_LINE[work]);
  }

  /** Stops probing; an outage still open is logged with its counts so far. */
  stop(): void {
    this.stopped = true;
    const outage = this.outage;
    if (!outage) return;
    if (outage.timer) clearTimeout(outage.timer);
    this.outage = null;
    this.deps.log.warn(this.counts(outage), 'stopping while the database is unavailable');
  }

  private scheduleProbe(outage: Outage): void {
    if (this.stopped) return;
    outage.timer = setTimeout(() => void this.probe(outage), this.deps.probeMs ?? OUTAGE_PROBE_MS);
    outage.timer.unref();
  }

  private async probe(outage: Outage): Promise<void> {
    outage.timer = null;
    try {
      await this.deps.probe();
    } catch (err) {
      if (this.outage !== outage) return;
      const now = this.now();
      if (now - outage.lastReminder >= (this.deps.reminderMs ?? OUTAGE_REMINDER_MS)) {
        outage.lastReminder = now;
        this.deps.log.warn({ err, ...this.counts(outage) }, 'database still unavailable');
      }
      this.scheduleProbe(outage);
      return;
    }
    if (this.outage !== outage) return;
    this.outage = null;
    this.deps.log.warn(this.counts(outage), 'database available again');
  }

  private now(): number {
    return this.deps.now ? this.deps.now() : performance.now();
  }

  /** `down_ms` and a count per kind of work: `refused_requests`, `refused_publishes`, ... */
  private counts(outage: Outage): Record<string, number> {
    const fields: Record<string, number> = { down_ms: Math.round(this.now() - outage.since) };
    for (const [work, n] of Object.entries(outage.refused)) fields[COUNT_FIELD[work as RefusedWork]] = n;
    return fields;
  }
}
