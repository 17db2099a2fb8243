import { createHash } from 'node:crypto';
import type { Clock } from '../clock.ts';
import { isUniqueViolation, type Db } from '../storage/database.ts';

/** How long a key is remembered (docs/api.md). */
export const IDEMPOTENCY_TTL_MICROS = 24 * 3600 * 1_000_000;
export const MAX_IDEMPOTENCY_KEY_LENGTH = 128;
/**
 * How long a claimed key without an answer counts as a request still running. Past it, the process
 * that claimed it died or could not record the answer, and a retry with the key runs again instead
 * of meeting 409 for the rest of the day. Longer than any request takes.
 */
export const IDEMPOTENCY_CLAIM_MICROS = 5 * 60 * 1_000_000;

export type IdempotencyBegin =
  | { kind: 'new' }
  | { kind: 'replay'; status: number; body: unknown }
  | { kind: 'conflict' }
  | { kind: 'in_progress' };

export function fingerprint(method: string, path: string, rawBody: Buffer | null): string {
  const hash = createHash('sha256').update(`${method} ${path}\n`);
  if (rawBody) hash.update(rawBody);
  return hash.digest('hex');
}

/**
 * The `Idempotency-Key` store. A key is claimed before the handler runs (so two concurrent requests
 * with one key cannot both run), completed with the answer, or released when the answer was a
 * server error (so the client's retry runs again). A claim left without an answer for
 * IDEMPOTENCY_CLAIM_MICROS is taken over.
 */
export class IdempotencyStore {
  constructor(private readonly deps: { db: Db; clock: Clock }) {}

  async begin(scope: string, key: string, print: string): Promise<IdempotencyBegin> {
    const { db, clock } = this.deps;
    const now = clock.nowMicros();
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        await db
          .insertInto('idempotency_keys')
          .values({
            scope,
            key,
            fingerprint: print,
            status: null,
            response: null,
            created_at: now,
            expires_at: now + IDEMPOTENCY_TTL_MICROS,
          })
          .execute();
        return { kind: 'new' };
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
      }
      const row = await db
        .selectFrom('idempotency_keys')
        .selectAll()
        .where('scope', '=', scope)
        .where('key', '=', key)
        .executeTakeFirst();
      if (!row) continue; // released in between: claim it again
      const abandoned = row.status === null && row.created_at <= now - IDEMPOTENCY_CLAIM_MICROS;
      if (row.expires_at <= now || abandoned) {
        // Only the row read here: a concurrent taker that deleted it and claimed anew keeps its claim.
        await db
          .deleteFrom('idempotency_keys')
          .where('scope', '=', scope)
          .where('key', '=', key)
          .where('created_at', '=', row.created_at)
          .execute();
        continue;
      }
      if (row.fingerprint !== print) return { kind: 'conflict' };
      if (row.status === null || row.response === null) return { kind: 'in_progress' };
      return { kind: 'replay', status: row.status, body: JSON.parse(row.response) as unknown };
    }
    return { kind: 'in_progress' };
  }

  async complete(scope: string, key: string, status: number, body: unknown): Promise<void> {
    await this.deps.db
      .updateTable('idempotency_keys')
      .set({ status, response: JSON.stringify(body ?? null) })
      .where('scope', '=', scope)
      .where('key', '=', key)
      .execute();
  }

  async release(scope: string, key: string): Promise<void> {
    await this.deps.db
      .deleteFrom('idempotency_keys')
      .where('scope', '=', scope)
      .where('key', '=', key)
      .execute();
  }

  async prune(): Promise<void> {
    await this.deps.db
      .deleteFrom('idempotency_keys')
      .where('expires_at', '<', this.deps.clock.nowMicros())
      .execute();
  }
}
