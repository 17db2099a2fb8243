import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Secrets (tokens, session cookies, login codes) are stored only as SHA-256 hashes: they are random
 * and long, so a fast hash is enough (docs/api/auth.md). Lookups go by hash, so the comparison that
 * matters is the database's index probe; `sameSecret` is for the few places that compare in memory.
 */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
