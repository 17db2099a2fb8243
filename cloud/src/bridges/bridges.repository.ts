import type { Db } from '../storage/database.ts';
import { keysetPage, type PageRequest } from '../storage/keyset.ts';
import type { Tables } from '../storage/schema.ts';

export type BridgeRow = Tables['bridges'];

/** The SQL of MQTT bridges. Revoked bridges stay (their fingerprint must keep being refused). */
export class BridgesRepository {
  async insert(db: Db, row: BridgeRow): Promise<void> {
    await db.insertInto('bridges').values(row).execute();
  }

  /** A live (not revoked) bridge of the account. */
  async find(db: Db, accountId: string, id: string): Promise<BridgeRow | undefined> {
    return db
      .selectFrom('bridges')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
  }

  async list(db: Db, accountId: string, page: PageRequest): Promise<BridgeRow[]> {
    const q = db
      .selectFrom('bridges')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('revoked_at', 'is', null);
    return keysetPage(q, 'created_at', 'id', 'asc', page).execute();
  }

  /** The bridge a client certificate belongs to, revoked or not. */
  async findByFingerprint(db: Db, fingerprint: string): Promise<BridgeRow | undefined> {
    return db
      .selectFrom('bridges')
      .selectAll()
      .where('cert_fingerprint', '=', fingerprint)
      .executeTakeFirst();
  }

  async revoke(db: Db, id: string, now: number): Promise<void> {
    await db.updateTable('bridges').set({ revoked_at: now }).where('id', '=', id).execute();
  }

  /** Of `ids`, those revoked meanwhile (by this or another process). */
  async revokedAmong(db: Db, ids: string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await db
      .selectFrom('bridges')
      .select('id')
      .where('id', 'in', ids)
      .where('revoked_at', 'is not', null)
      .execute();
    return rows.map((r) => r.id);
  }

  async touch(db: Db, ids: string[], now: number): Promise<void> {
    if (ids.length === 0) return;
    await db.updateTable('bridges').set({ last_seen_at: now }).where('id', 'in', ids).execute();
  }
}
