import { sql } from 'kysely';
import { newId } from '../../../shared/ids.ts';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import { isConnectionError, type Database, type Db } from '../storage/database.ts';
import type { DatabaseOutageLog } from '../storage/outage-log.ts';
import type { Tables } from '../storage/schema.ts';

export type JobRow = Tables['jobs'];

export interface JobHandler {
  /**
   * Throws to be retried after `retryDelayMs(attempts)`; gives up after `maxAttempts`, or once the
   * next try would fall `retryForMs` after the job was queued.
   */
  run(payload: unknown, job: JobRow): Promise<void>;
  /**
   * Attempts at most, those that ended with their process included: a job claimed for the
   * attempt after the last is given up without running (`abandoned`), so a job that kills its
   * process (out of memory) is not claimed again for ever.
   */
  maxAttempts?: number;
  retryDelayMs?: (attempts: number) => number;
  /** How long after it was queued a failed job is still tried again. */
  retryForMs?: number;
  /**
   * Records, for the job's own resource, that the queue gave the job up because its process ended
   * during each of its attempts (a last attempt that throws is `run`'s to record). A throw here
   * leaves the job to be given up again later.
   */
  abandoned?(payload: unknown, job: JobRow): Promise<void>;
  /**
   * The payload the job row keeps once the job is done or has failed for good: a run needs all of
   * it (so a retry can still send), the record must not keep a secret (a mailed sign-in code).
   */
  finishedPayload?: (payload: unknown) => unknown;
  /**
   * How long a claim holds without news, when shorter than the queue's `claimMs` (which bounds every
   * claim). The claim is renewed every third of it while the job runs, so a job whose process died
   * is claimed again after `lockMs`.
   */
  lockMs?: number;
  /**
   * Due jobs of a lower class are claimed first (default 0). Work that waits on someone else's
   * server (a webhook receiver that takes its 10 s) or takes seconds of CPU (a report) is class 1,
   * so a burst of it does not hold up an alarm's mail queued behind it.
   */
  priority?: number;
}

/** How long a claim holds without news when neither the handler nor the queue says otherwise. */
export const DEFAULT_CLAIM_MS = 5 * 60 * 1000;
const DEFAULT_MAX_ATTEMPTS = 8;
/** Finished jobs removed per statement, so a long backlog never holds the write lock for long. */
const PRUNE_BATCH = 1_000;

function defaultRetryDelayMs(attempts: number): number {
  return Math.min(3_600_000, 1000 * 2 ** attempts);
}

/** How long a job of `handler`'s waits after its `attempts`-th failed attempt. */
function retryDelay(handler: JobHandler, attempts: number): number {
  return (handler.retryDelayMs ?? defaultRetryDelayMs)(attempts);
}

/**
 * Retries of a message to the outside (a mail, a chat post): 2 s after the first failure, doubling,
 * at most 10 minutes apart, for 24 hours. A mail server down for an afternoon delays an alarm's
 * mail, it does not lose it.
 */
export const OUTBOUND_RETRIES = {
  maxAttempts: 1_000, // bounded by retryForMs
  retryDelayMs: (attempts: number) => Math.min(600_000, defaultRetryDelayMs(attempts)),
  retryForMs: 24 * 3_600_000,
} satisfies Partial<JobHandler>;

/**
 * Work that must outlive a request (mail, webhook deliveries, reports) goes into the `jobs` table,
 * in the same transaction as the change that caused it, and is claimed by whichever replica is free:
 * one `UPDATE … RETURNING` on both databases, with `FOR UPDATE SKIP LOCKED` on PostgreSQL.
 */
export class JobQueue {
  private readonly handlers = new Map<string, JobHandler>();
  private timer: NodeJS.Timeout | null = null;
  private started = false;
  private halted = false;
  private kicked = false;
  private current: Promise<void> | null = null;

  constructor(
    private readonly deps: {
      database: Database;
      clock: Clock;
      log: Logger;
      pollMs?: number;
      /**
       * JOB_CLAIM_SECONDS: how long a claim holds without news. A running job renews its claim every
       * third of it, so only a job whose process died (or stalled that long) is claimed again, by
       * any replica, once it has lapsed.
       */
      claimMs?: number;
      /** Where a claim the database did not answer is logged (once per outage, not once per poll). */
      dbOutage?: DatabaseOutageLog;
    },
  ) {}

  private get claimMs(): number {
    return this.deps.claimMs ?? DEFAULT_CLAIM_MS;
  }

  /** How long a claim on a job of `handler`'s kind holds without news. */
  private lockMs(handler: JobHandler): number {
    return Math.min(handler.lockMs ?? Infinity, this.claimMs);
  }

  register(kind: string, handler: JobHandler): void {
    this.handlers.set(kind, handler);
  }

  /** Adds a job; pass the transaction of the change that causes it. */
  async enqueue(db: Db, kind: string, payload: unknown, runAtMicros?: number): Promise<string> {
    const now = this.deps.clock.nowMicros();
    const id = newId('job');
    await db
      .insertInto('jobs')
      .values({
        id,
        kind,
        payload: JSON.stringify(payload),
        run_at: runAtMicros ?? now,
        attempts: 0,
        locked_until: null,
        done_at: null,
        failed_at: null,
        last_error: null,
        created_at: now,
      })
      .execute();
    return id;
  }

  /**
   * Marks a running job done inside its handler's own transaction, so what the handler writes and
   * the job's completion commit together. False when the job is done already: this run is a second
   * one of a job claimed again after its claim lapsed (its first process stalled), and writes nothing.
   */
  async finishIn(db: Db, jobId: string): Promise<boolean> {
    const result = await db
      .updateTable('jobs')
      .set({ done_at: this.deps.clock.nowMicros(), locked_until: null })
      .where('id', '=', jobId)
      .where('done_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /**
   * Removes jobs that finished (done, or failed for good) before `before`, in batches; answers how
   * many. Pending and retrying jobs are never removed.
   */
  async pruneFinished(before: number): Promise<number> {
    const { db } = this.deps.database;
    let removed = 0;
    for (;;) {
      const result = await db
        .deleteFrom('jobs')
        .where('id', 'in', (eb) =>
          eb
            .selectFrom('jobs')
            .select('id')
            .where((w) => w.or([w('done_at', '<', before), w('failed_at', '<', before)]))
            .limit(PRUNE_BATCH),
        )
        .executeTakeFirst();
      const n = Number(result.numDeletedRows);
      removed += n;
      if (n < PRUNE_BATCH) return removed;
    }
  }

  /** Asks a started runner to look for work now instead of at its next poll. */
  kick(): void {
    if (!this.started || this.halted) return;
    void this.drain();
  }

  start(): void {
    this.started = true;
    const poll = () => {
      this.timer = setTimeout(() => {
        void this.drain().finally(() => {
          if (!this.halted) poll();
        });
      }, this.deps.pollMs ?? 1000);
    };
    poll();
    this.kick();
  }

  /** Stops claiming and waits for the job in flight. Safe to call twice. */
  async stop(): Promise<void> {
    this.halted = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.current;
  }

  /** Runs due jobs until none is left; concurrent calls share one pass (tests call it directly). */
  drain(): Promise<void> {
    if (this.current) {
      this.kicked = true;
      return this.current;
    }
    this.current = this.loop().finally(() => {
      this.current = null;
    });
    return this.current;
  }

  private async loop(): Promise<void> {
    try {
      do {
        this.kicked = false;
        for (let job = await this.claim(); job; job = this.halted ? undefined : await this.claim()) {
          await this.execute(job);
        }
      } while (this.kicked && !this.halted);
    } catch (err) {
      if (this.deps.dbOutage && isConnectionError(err)) this.deps.dbOutage.refused('background', err);
      else this.deps.log.error({ err }, 'job queue: claiming failed');
    }
  }

  /**
   * One statement on both databases. On SQLite it takes the write lock before it reads, so processes
   * sharing the file wait for each other (busy_timeout); a read-then-update transaction instead fails
   * with SQLITE_BUSY when another process claims in between.
   */
  private async claim(): Promise<JobRow | undefined> {
    const { database, clock } = this.deps;
    const now = clock.nowMicros();
    const kinds = [...this.handlers.keys()];
    if (kinds.length === 0) return undefined;
    // Each kind's own claim from the start: a process that dies before its first renewal leaves the
    // job to others after that kind's claim, not after the longest.
    const lockedUntil = sql.join(
      kinds.map(
        (kind) =>
          sql`WHEN ${kind} THEN CAST(${now + this.lockMs(this.handlers.get(kind)!) * 1000} AS BIGINT)`,
      ),
      sql` `,
    );
    const priority = sql.join(
      kinds.map((kind) => sql`WHEN ${kind} THEN ${this.handlers.get(kind)!.priority ?? 0}`),
      sql` `,
    );
    const skipLocked = sql.raw(database.dialect === 'postgres' ? 'FOR UPDATE SKIP LOCKED' : '');
    const result = await sql<JobRow>`
      UPDATE jobs SET locked_until = CASE kind ${lockedUntil} END, attempts = attempts + 1
      WHERE id = (
        SELECT id FROM jobs
        WHERE done_at IS NULL AND failed_at IS NULL AND run_at <= ${now}
          AND (locked_until IS NULL OR locked_until < ${now})
          AND kind IN (${sql.join(kinds)})
        ORDER BY CASE kind ${priority} END, run_at LIMIT 1 ${skipLocked})
      RETURNING *`.execute(database.db);
    return result.rows[0];
  }

  private async execute(job: JobRow): Promise<void> {
    const handler = this.handlers.get(job.kind);
    if (!handler) return;
    const log = this.deps.log.child({ job_id: job.id, job_kind: job.kind });
    let payload: unknown;
    const finished = () =>
      handler.finishedPayload && payload !== undefined
        ? { payload: JSON.stringify(handler.finishedPayload(payload)) }
        : {};
    const maxAttempts = handler.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
    const heartbeat = this.keepClaimed(job.id, this.lockMs(handler));
    try {
      payload = JSON.parse(job.payload);
      if (job.attempts > maxAttempts) {
        clearInterval(heartbeat);
        await this.abandon(job, handler, payload, maxAttempts, finished, log);
        return;
      }
      await handler.run(payload, job);
      clearInterval(heartbeat);
      await this.finish(job.id, { done_at: this.deps.clock.nowMicros(), last_error: null, ...finished() });
    } catch (err) {
      clearInterval(heartbeat);
      const message = err instanceof Error ? err.message : String(err);
      const now = this.deps.clock.nowMicros();
      const delayMs = retryDelay(handler, job.attempts);
      const outOfTime =
        handler.retryForMs !== undefined && now + delayMs * 1000 > job.created_at + handler.retryForMs * 1000;
      if (job.attempts >= maxAttempts || outOfTime) {
        log.error({ err, attempts: job.attempts }, 'job failed for good');
        await this.finish(job.id, { failed_at: now, last_error: message, ...finished() });
      } else {
        log.warn({ err, attempts: job.attempts, retry_in_ms: delayMs }, 'job failed; will retry');
        await this.finish(job.id, { run_at: now + delayMs * 1000, last_error: message });
      }
    }
  }

  /**
   * Gives up a job claimed for the attempt after its last: every attempt so far ended with its
   * process, none with a throw. When its handler cannot record that, the job is due again later.
   */
  private async abandon(
    job: JobRow,
    handler: JobHandler,
    payload: unknown,
    attempts: number,
    finished: () => { payload?: string },
    log: Logger,
  ): Promise<void> {
    const message = `given up: the process ended during each of its ${attempts} attempts`;
    try {
      await handler.abandoned?.(payload, job);
    } catch (err) {
      const delayMs = retryDelay(handler, attempts);
      log.warn({ err, retry_in_ms: delayMs }, 'job to be given up: its handler failed to record it');
      await this.finish(job.id, { run_at: this.deps.clock.nowMicros() + delayMs * 1000 });
      return;
    }
    log.error({ attempts }, `job ${message}`);
    await this.finish(job.id, { failed_at: this.deps.clock.nowMicros(), last_error: message, ...finished() });
  }

  /** Ends this run of a job: done, failed for good, or due again; the claim is let go. */
  private async finish(
    jobId: string,
    change: Partial<Pick<JobRow, 'done_at' | 'failed_at' | 'run_at' | 'last_error' | 'payload'>>,
  ): Promise<void> {
    await this.deps.database.db
      .updateTable('jobs')
      .set({ ...change, locked_until: null })
      .where('id', '=', jobId)
      .execute();
  }

  /** Renews the claim to `lockMs` from now every third of that until the timer is cleared. */
  private keepClaimed(jobId: string, lockMs: number): NodeJS.Timeout {
    const { db } = this.deps.database;
    const renew = () => {
      db.updateTable('jobs')
        .set({ locked_until: this.deps.clock.nowMicros() + lockMs * 1000 })
        .where('id', '=', jobId)
        .where('done_at', 'is', null)
        .where('failed_at', 'is', null)
        .execute()
        .catch((err: unknown) => this.deps.log.warn({ err, job_id: jobId }, 'job claim renewal failed'));
    };
    const timer = setInterval(renew, lockMs / 3);
    timer.unref();
    return timer;
  }
}
