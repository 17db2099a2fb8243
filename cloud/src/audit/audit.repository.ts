import type { AuditKind } from '../../../shared/audit-kinds.ts';
import { newId } from '../../../shared/ids.ts';
import type { Db } from '../storage/database.ts';
import { keysetPage, type PageRequest } from '../storage/keyset.ts';
import type { Tables } from '../storage/schema.ts';
import { entryHash } from './audit-chain.ts';

/** Audit kinds (shared/audit-kinds.ts). */
export type { AuditKind };

export interface AuditEntryInput {
  accountId: string;
  kind: AuditKind;
  /** `usr_…` for people and their tokens, `system` for the service itself. */
  by: string;
  target: string;
  details?: Record<string, unknown>;
  ts: number;
}

export type AuditRow = Tables['audit_log'];

export interface AuditFilter {
  from?: number | undefined;
  to?: number | undefined;
  kind?: string | undefined;
}

/** An account's last audit chain link; `entries` is its `seq` (0 before the first entry). */
export interface ChainHead {
  entryId: string | null;
  hash: string | null;
  entries: number;
}

/** Append-only: there is no update or delete here, on purpose. */
export class AuditRepository {
  /**
   * Writes inside the caller's transaction, so the entry exists exactly when the change does, as the
   * next link of the account's hash chain (audit-chain.ts). The upsert on the account's chain head
   * takes that row's lock until the caller's transaction ends, so concurrent appends of one account
   * (on PostgreSQL) chain one after the other; it answers the new `seq` and the previous entry's hash
   * (the head's hash column is still the previous one's). It must run inside a transaction (a
   * Kysely transaction, or `lockedTransaction`'s handle): its three statements are one append.
   * Being the transaction's last write keeps lock orders simple: a transaction that holds the chain
   * head never waits for a row another transaction of the account holds while waiting for the head.
   */
  async record(db: Db, entry: AuditEntryInput): Promise<void> {
    const head = await db
      .insertInto('audit_chain_heads')
      .values({ account_id: entry.accountId, seq: 1, entry_id: null, hash: null })
      .onConflict((oc) =>
        oc.column('account_id').doUpdateSet((eb) => ({ seq: eb('audit_chain_heads.seq', '+', 1) })),
      )
      .returning(['seq', 'hash'])
      .executeTakeFirstOrThrow();
    const fields = {
      prev_hash: head.hash,
      account_id: entry.accountId,
      seq: head.seq,
      id: newId('aud'),
      ts: entry.ts,
      kind: entry.kind,
      actor: entry.by,
      target: entry.target,
      details: JSON.stringify(entry.details ?? {}),
    };
    const hash = entryHash(fields);
    await db
      .insertInto('audit_log')
      .values({ ...fields, hash })
      .execute();
    await db
      .updateTable('audit_chain_heads')
      .set({ entry_id: fields.id, hash })
      .where('account_id', '=', entry.accountId)
      .execute();
  }

  /** The account's last chain link as the chain head row records it (printed in reports). */
  async chainHead(db: Db, accountId: string): Promise<ChainHead> {
    const row = await db
      .selectFrom('audit_chain_heads')
      .select(['seq', 'entry_id', 'hash'])
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    return row
      ? { entryId: row.entry_id, hash: row.hash, entries: row.seq }
      : { entryId: null, hash: null, entries: 0 };
  }

  /** Chain entries with `after < seq <= upTo`, in chain order (entries older than the chain have none). */
  async chainPage(
    db: Db,
    accountId: string,
    after: number,
    upTo: number | null,
    limit: number,
  ): Promise<AuditRow[]> {
    let q = db
      .selectFrom('audit_log')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('seq', 'is not', null)
      .where('seq', '>', after);
    if (upTo !== null) q = q.where('seq', '<=', upTo);
    return q.orderBy('seq').limit(limit).execute();
  }

  async find(db: Db, accountId: string, id: string): Promise<AuditRow | undefined> {
    return db
      .selectFrom('audit_log')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  async list(db: Db, accountId: string, filter: AuditFilter, page: PageRequest): Promise<AuditRow[]> {
    let q = db.selectFrom('audit_log').selectAll().where('account_id', '=', accountId);
    if (filter.from !== undefined) q = q.where('ts', '>=', filter.from);
    if (filter.to !== undefined) q = q.where('ts', '<', filter.to);
    if (filter.kind !== undefined) q = q.where('kind', '=', filter.kind);
    return keysetPage(q, 'ts', 'id', 'desc', page).execute();
  }
}
