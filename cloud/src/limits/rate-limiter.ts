import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../storage/database.ts';

export interface RateLimitResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** End of the current window, epoch seconds. */
  resetAt: number;
  retryAfterSeconds: number;
}

/** How long a replica keeps hits to itself before it adds them to the shared row, by default. */
export const DEFAULT_SYNC_MS = 1000;

/**
 * The share of a limit a replica may count locally before it reports to the shared row: at most
 * `floor(limit / SLACK_DIVISOR)` hits (5 %). Limits under 20 get 0: every hit is written at once.
 */
export const SLACK_DIVISOR = 20;

/** One bucket's window as this process sees it. */
interface Window {
  bucket: string;
  start: number;
  end: number;
  /** The shared row's count as last read (it includes this process's hits written so far). */
  known: number;
  /** Whether this process has read the row in this window yet (its first hit writes at once). */
  read: boolean;
  /** Hits counted here and not written yet. */
  pending: number;
  /** Hits being written by the statement in flight. */
  writing: number;
  /** Settles when the last statement queued for this window has run: one at a time per window. */
  tail: Promise<void>;
}

/**
 * Fixed-window counters shared by every replica through one database row per (bucket, window)
 * (docs/architecture.md, "Storage"), written in batches (docs/design/rate-limits.md).
 *
 * A hit is decided on this process's view of the window: the row's count as last read plus its own
 * hits not written yet. The first hit of a window in this process, and each hit once fewer than
 * `slack = floor(limit / 20)` would be left after it, are written at once and decided on the count
 * the database answers (every hit is, when `slack` is 0 or `syncMs` is 0). Other hits are counted in
 * memory and written together: when half the slack is waiting, or `syncMs` after the first of them.
 * A window the view shows exhausted refuses without writing: counts only grow within a window, so
 * that refusal is exact. One process: every answer is exact. N processes: each has at most `slack`
 * hits the others cannot see, so together they allow at most `limit + (N - 1) * slack` per window.
 * A crash loses the hits not written yet: at most `slack` per bucket, and `syncMs` worth.
 */
export class RateLimiter {
  private readonly windows = new Map<string, Window>();
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private readonly syncMs: number;

  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      log?: Logger;
      /** Flush counted hits at the latest this long after the first; 0 writes every hit at once. */
      syncMs?: number;
    },
  ) {
    this.syncMs = deps.syncMs ?? DEFAULT_SYNC_MS;
  }

  async hit(bucket: string, limit: number, windowSeconds = 60): Promise<RateLimitResult> {
    for (let waited = false; ; waited = true) {
      const nowSeconds = Math.floor(this.deps.clock.nowMicros() / 1_000_000);
      const start = nowSeconds - (nowSeconds % windowSeconds);
      const window = this.window(bucket, start, start + windowSeconds);
      const answer = (count: number): RateLimitResult => ({
        allowed: count <= limit,
        limit,
        remaining: Math.max(0, limit - count),
        resetAt: window.end,
        retryAfterSeconds: Math.max(1, window.end - nowSeconds),
      });
      const seen = window.known + window.writing + window.pending;
      if (seen >= limit) return answer(seen + 1);
      const slack = this.syncMs === 0 || this.stopped ? 0 : Math.floor(limit / SLACK_DIVISOR);
      const full = window.writing + window.pending >= slack;
      if (slack === 0 || !window.read || limit - seen - 1 < slack || (full && waited)) {
        return answer(await this.exclusive([window], () => this.write([window], 1)));
      }
      if (!full) {
        window.pending += 1;
        // Half the slack waiting: write it, while the other half can still be counted here.
        if (window.pending === Math.ceil(slack / 2)) void this.flushQuietly([window]);
        else this.schedule();
        return answer(seen + 1);
      }
      // This process's share is in flight: decide once its count is back (or on the row, if still full).
      await window.tail;
    }
  }

  /** Writes every hit counted so far, in one transaction. */
  async flush(): Promise<void> {
    await this.writePending([...this.windows.values()]);
    this.forgetEnded();
  }

  /** Writes what is left and stops the timer; hits after this are written at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.flush();
    await Promise.all([...this.windows.values()].map((w) => w.tail));
  }

  /** Drops windows that ended more than a day ago. */
  async prune(): Promise<void> {
    const cutoff = Math.floor(this.deps.clock.nowMicros() / 1_000_000) - 86_400;
    await this.deps.db.deleteFrom('rate_limit_counters').where('window_start', '<', cutoff).execute();
    this.forgetEnded();
  }

  private window(bucket: string, start: number, end: number): Window {
    const key = `${start}:${bucket}`;
    let window = this.windows.get(key);
    if (!window) {
      window = { bucket, start, end, known: 0, read: false, pending: 0, writing: 0, tail: Promise.resolve() };
      this.windows.set(key, window);
    }
    return window;
  }

  /** Windows that are over and have nothing left to write: their counts no longer decide anything. */
  private forgetEnded(): void {
    const nowSeconds = Math.floor(this.deps.clock.nowMicros() / 1_000_000);
    for (const [key, w] of this.windows)
      if (w.end <= nowSeconds && w.pending === 0 && w.writing === 0) this.windows.delete(key);
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.flushQuietly([...this.windows.values()]);
    }, this.syncMs);
    this.timer.unref();
  }

  private async flushQuietly(windows: Window[]): Promise<void> {
    try {
      await this.writePending(windows);
      this.forgetEnded();
    } catch (err) {
      this.deps.log?.error({ err }, 'rate-limit counters not written (kept for the next flush)');
      this.schedule();
    }
  }

  /**
   * Writes the counted hits of these windows in one transaction, rows in key order: two replicas
   * flushing the same buckets lock their rows in the same order, so they cannot deadlock.
   */
  private async writePending(windows: Window[]): Promise<void> {
    const waiting = windows
      .filter((w) => w.pending > 0)
      .sort((a, b) => a.start - b.start || (a.bucket < b.bucket ? -1 : a.bucket > b.bucket ? 1 : 0));
    if (waiting.length > 0) await this.exclusive(waiting, () => this.write(waiting, 0));
  }

  /** Adds `n` hits to the window's shared row; answers the row's count. */
  private async add(db: Db, w: Window, n: number): Promise<number> {
    if (n === 0) return w.known;
    const row = await db
      .insertInto('rate_limit_counters')
      .values({ bucket: w.bucket, window_start: w.start, count: n })
      .onConflict((oc) =>
        oc
          .columns(['bucket', 'window_start'])
          .doUpdateSet((eb) => ({ count: eb('rate_limit_counters.count', '+', n) })),
      )
      .returning('count')
      .executeTakeFirstOrThrow();
    return row.count;
  }

  /** Runs `work` once every earlier statement of these windows has settled, and before later ones. */
  private exclusive<T>(windows: Window[], work: () => Promise<T>): Promise<T> {
    const run = Promise.all(windows.map((w) => w.tail)).then(work);
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    for (const w of windows) w.tail = settled;
    return run;
  }

  /**
   * Adds each window's pending hits (and `extra` more to the last one, the hit being decided) to the
   * shared rows in one transaction, and reads the counts back. Answers the last window's count.
   */
  private async write(windows: Window[], extra: number): Promise<number> {
    const adds = windows.map((w, i) => w.pending + (i === windows.length - 1 ? extra : 0));
    windows.forEach((w, i) => {
      w.pending = 0;
      w.writing = adds[i]!;
    });
    try {
      // One window (a hit decided on the shared count): one statement, no transaction around it.
      const counts =
        windows.length === 1
          ? [await this.add(this.deps.db, windows[0]!, adds[0]!)]
          : await this.deps.db.transaction().execute(async (trx) => {
              const out: number[] = [];
              for (const [i, w] of windows.entries()) out.push(await this.add(trx, w, adds[i]!));
              return out;
            });
      windows.forEach((w, i) => {
        w.known = Math.max(w.known, counts[i]!);
        w.read = true;
        w.writing = 0;
      });
      return counts[counts.length - 1]!;
    } catch (err) {
      // Not written: counted hits stay pending for the next flush; the hit being decided fails.
      windows.forEach((w, i) => {
        w.pending += adds[i]! - (i === windows.length - 1 ? extra : 0);
        w.writing = 0;
      });
      throw err;
    }
  }
}
