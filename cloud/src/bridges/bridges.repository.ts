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

  /** Revokes a live bridge; false when a concurrent revoke got there first. */
  async revoke(db: Db, id: string, now: number): Promise<boolean> {
    const result = await db
      .updateTable('bridges')
      .set({ revoked_at: now })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
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

  /** Records that process `replicaId` holds a live connection of the bridge now. */
  async present(db: Db, bridgeId: string, replicaId: string, now: number): Promise<void> {
    await db
      .insertInto('bridge_presence')
      .values({ bridge_id: bridgeId, replica_id: replicaId, seen_at: now })
      .onConflict((oc) => oc.columns(['bridge_id', 'replica_id']).doUpdateSet({ seen_at: now }))
      .execute();
  }

  /** The process holds no live connection of the bridge any more (all of its bridges: no `bridgeId`). */
  async absent(db: Db, replicaId: string, bridgeId?: string): Promise<void> {
    let q = db.deleteFrom('bridge_presence').where('replica_id', '=', replicaId);
    if (bridgeId !== undefined) q = q.where('bridge_id', '=', bridgeId);
    await q.execute();
  }

  /** Removes presence rows nobody refreshed since `before` (their process died). */
  async pruneStalePresence(db: Db, before: number): Promise<void> {
    await db.deleteFrom('bridge_presence').where('seen_at', '<', before).execute();
  }

  /** Refreshes the process's presence rows of `ids`. */
  async refreshPresence(db: Db, ids: string[], replicaId: string, now: number): Promise<void> {
    if (ids.length === 0) return;
    await db
      .updateTable('bridge_presence')
      .set({ seen_at: now })
      .where('replica_id', '=', replicaId)
      .where('bridge_id', 'in', ids)
      .execute();
  }

  /** Of `ids`, the bridges some process holds a connection of, refreshed at or after `freshSince`. */
  async connectedAmong(db: Db, ids: readonly string[], freshSince: number): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await db
      .selectFrom('bridge_presence')
      .select('bridge_id')
      .distinct()
      .where('bridge_id', 'in', ids)
      .where('seen_at', '>=', freshSince)
      .execute();
    return new Set(rows.map((r) => r.bridge_id));
  }

  /** Whether a live bridge of the site is connected to any process (refreshed at or after `freshSince`). */
  async siteReachable(db: Db, accountId: string, siteId: string, freshSince: number): Promise<boolean> {
    const row = await db
      .selectFrom('bridge_presence')
      .innerJoin('bridges', 'bridges.id', 'bridge_presence.bridge_id')
      .select('bridges.id')
      .where('bridges.account_id', '=', accountId)
      .where('bridges.site_id', '=', siteId)
      .where('bridges.revoked_at', 'is', null)
      .where('bridge_presence.seen_at', '>=', freshSince)
      .executeTakeFirst();
    return row !== undefined;
  }
}
