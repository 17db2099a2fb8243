import type { Db } from '../storage/database.ts';
import type { Tables } from '../storage/schema.ts';

export type LoginCodeRow = Tables['login_codes'];
export type SessionRow = Tables['sessions'];

/** Magic-link codes and sessions (docs/api/auth.md). */
export class AuthRepository {
  /** Any earlier code for the same e-mail still in its window becomes unusable. */
  async invalidateIssuedCodes(db: Db, email: string): Promise<void> {
    await db
      .updateTable('login_codes')
      .set({ state: 'invalidated' })
      .where('email', '=', email)
      .where('state', '=', 'issued')
      .execute();
  }

  async insertCode(db: Db, row: LoginCodeRow): Promise<void> {
    await db.insertInto('login_codes').values(row).execute();
  }

  async latestIssuedCode(db: Db, email: string): Promise<LoginCodeRow | undefined> {
    return db
      .selectFrom('login_codes')
      .selectAll()
      .where('email', '=', email)
      .where('state', '=', 'issued')
      .orderBy('created_at', 'desc')
      .limit(1)
      .executeTakeFirst();
  }

  async findIssuedCodeByLink(db: Db, linkHash: string): Promise<LoginCodeRow | undefined> {
    return db
      .selectFrom('login_codes')
      .selectAll()
      .where('link_hash', '=', linkHash)
      .where('state', '=', 'issued')
      .executeTakeFirst();
  }

  /**
   * Claims one attempt of an issued code: counts it and answers the code's row, or undefined when
   * the code is no longer issued or its attempts are used up. One statement, so concurrent entries
   * never claim more than `maxAttempts` between them.
   */
  async claimAttempt(db: Db, id: string, maxAttempts: number): Promise<LoginCodeRow | undefined> {
    return db
      .updateTable('login_codes')
      .set((eb) => ({ attempts: eb('attempts', '+', 1) }))
      .where('id', '=', id)
      .where('state', '=', 'issued')
      .where('attempts', '<', maxAttempts)
      .returningAll()
      .executeTakeFirst();
  }

  /** Marks the code used; false when another request used it first (single use under races). */
  async consumeCode(db: Db, id: string): Promise<boolean> {
    const result = await db
      .updateTable('login_codes')
      .set({ state: 'used' })
      .where('id', '=', id)
      .where('state', '=', 'issued')
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  async insertSession(db: Db, row: SessionRow): Promise<void> {
    await db.insertInto('sessions').values(row).execute();
  }

  async findLiveSession(db: Db, secretHash: string, now: number): Promise<SessionRow | undefined> {
    return db
      .selectFrom('sessions')
      .selectAll()
      .where('secret_hash', '=', secretHash)
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', now)
      .executeTakeFirst();
  }

  async findSession(db: Db, id: string): Promise<SessionRow | undefined> {
    return db.selectFrom('sessions').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async touchSession(db: Db, id: string, now: number, expiresAt: number): Promise<void> {
    await db
      .updateTable('sessions')
      .set({ last_seen_at: now, expires_at: expiresAt })
      .where('id', '=', id)
      .execute();
  }

  async revokeSession(db: Db, id: string, now: number): Promise<void> {
    await db
      .updateTable('sessions')
      .set({ revoked_at: now })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .execute();
  }

  async revokeUserSessions(db: Db, userId: string, now: number): Promise<number> {
    const result = await db
      .updateTable('sessions')
      .set({ revoked_at: now })
      .where('user_id', '=', userId)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }
}
