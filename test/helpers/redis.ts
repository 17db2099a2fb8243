import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

/** The machine's Redis, which CI starts (.ci/run). */
export const REDIS_URL = 'redis://127.0.0.1:6379';

/** A key prefix of one test's own (`REDIS_PREFIX`), so tests sharing the Redis stay apart. */
export function redisPrefix(): string {
  return `smtest:${randomBytes(6).toString('hex')}:`;
}

/** Removes the keys under a test's prefix; nothing when no prefix was made (never the whole Redis). */
export async function removeRedisKeys(prefix: string): Promise<void> {
  if (!prefix.startsWith('smtest:')) return;
  const redis = new Redis(REDIS_URL);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}
