import { newId } from '../../../shared/ids.ts';
import type { PageRequest } from '../http/pagination.ts';
import type { Db } from '../storage/database.ts';
import { keysetPage } from '../storage/keyset.ts';
import type { Tables } from '../storage/schema.ts';

/** Audit kinds (docs/api/reads.md). */
export type AuditKind =
  | 'threshold.changed'
  | 'sensor.recomputed'
  | 'event.acknowledged'
  | 'silence.created'
  | 'silence.ended'
  | 'device.created'
  | 'device.updated'
  | 'device.deleted'
  | 'device.moved'
  | 'device.token_rotated'
  | 'site.created'
  | 'site.updated'
  | 'site.deleted'
  | 'token.created'
  | 'token.revoked'
  | 'bridge.created'
  | 'bridge.revoked'
  | 'webhook.created'
  | 'webhook.deleted'
  | 'sessions.revoked'
  | 'report.created';

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

/** Append-only: there is no update or delete here, on purpose. */
export class AuditRepository {
  /** Writes inside the caller's transaction, so the entry exists exactly when the change does. */
  async record(db: Db, entry: AuditEntryInput): Promise<void> {
    await db
      .insertInto('audit_log')
      .values({
        id: newId('aud'),
        account_id: entry.accountId,
        ts: entry.ts,
        kind: entry.kind,
        actor: entry.by,
        target: entry.target,
        details: JSON.stringify(entry.details ?? {}),
      })
      .execute();
  }

  async list(db: Db, accountId: string, filter: AuditFilter, page: PageRequest): Promise<AuditRow[]> {
    let q = db.selectFrom('audit_log').selectAll().where('account_id', '=', accountId);
    if (filter.from !== undefined) q = q.where('ts', '>=', filter.from);
    if (filter.to !== undefined) q = q.where('ts', '<', filter.to);
    if (filter.kind !== undefined) q = q.where('kind', '=', filter.kind);
    return keysetPage(q, 'ts', 'id', 'desc', page).execute();
  }
}
