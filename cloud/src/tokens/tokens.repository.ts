import type { Db } from '../storage/database.ts';
import { keysetPage, type PageRequest } from '../storage/keyset.ts';
import type { Tables } from '../storage/schema.ts';

export type ApiTokenRow = Tables['api_tokens'];

export class TokensRepository {
  async insert(db: Db, row: ApiTokenRow): Promise<void> {
    await db.insertInto('api_tokens').values(row).execute();
  }

  async findLiveByHash(db: Db, tokenHash: string): Promise<ApiTokenRow | undefined> {
    return db
      .selectFrom('api_tokens')
      .selectAll()
      .where('token_hash', '=', tokenHash)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
  }

  async list(db: Db, accountId: string, page: PageRequest): Promise<ApiTokenRow[]> {
    const q = db
      .selectFrom('api_tokens')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('revoked_at', 'is', null);
    return keysetPage(q, 'created_at', 'id', 'asc', page).execute();
  }

  async findLive(db: Db, accountId: string, id: string): Promise<ApiTokenRow | undefined> {
    return db
      .selectFrom('api_tokens')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
  }

  /**
   * Revokes a live token; false when it is revoked already (a concurrent revoke got there first:
   * on PostgreSQL the second waits for the first's row lock, then finds no live row).
   */
  async revoke(db: Db, id: string, now: number): Promise<boolean> {
    const result = await db
      .updateTable('api_tokens')
      .set({ revoked_at: now })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** Written at most once a minute per token, so busy scripts do not turn every read into a write. */
  async touch(db: Db, id: string, now: number): Promise<void> {
    await db
      .updateTable('api_tokens')
      .set({ last_used_at: now })
      .where('id', '=', id)
      .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', now - 60_000_000)]))
      .execute();
  }
}
