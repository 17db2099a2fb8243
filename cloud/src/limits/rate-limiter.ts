import type { Clock } from '../clock.ts';
import type { Db } from '../storage/database.ts';

export interface RateLimitResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** End of the current window, epoch seconds. */
  resetAt: number;
  retryAfterSeconds: number;
}

/**
 * Fixed-window counters kept in the database, so every replica behind a load balancer counts the
 * same requests (ARCHITECTURE.md, "Storage"). One upsert per request.
 */
export class RateLimiter {
  constructor(private readonly deps: { db: Db; clock: Clock }) {}

  async hit(bucket: string, limit: number, windowSeconds = 60): Promise<RateLimitResult> {
    const nowSeconds = Math.floor(this.deps.clock.nowMicros() / 1_000_000);
    const windowStart = nowSeconds - (nowSeconds % windowSeconds);
    const row = await this.deps.db
      .insertInto('rate_limit_counters')
      .values({ bucket, window_start: windowStart, count: 1 })
      .onConflict((oc) =>
        oc
          .columns(['bucket', 'window_start'])
          .doUpdateSet((eb) => ({ count: eb('rate_limit_counters.count', '+', 1) })),
      )
      .returning('count')
      .executeTakeFirstOrThrow();
    const resetAt = windowStart + windowSeconds;
    return {
      allowed: row.count <= limit,
      limit,
      remaining: Math.max(0, limit - row.count),
      resetAt,
      retryAfterSeconds: Math.max(1, resetAt - nowSeconds),
    };
  }

  /** Drops windows that ended more than a day ago. */
  async prune(): Promise<void> {
    const cutoff = Math.floor(this.deps.clock.nowMicros() / 1_000_000) - 86_400;
    await this.deps.db.deleteFrom('rate_limit_counters').where('window_start', '<', cutoff).execute();
  }
}
