import { newId, newSecret } from '../../../shared/ids.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import { USER_TOKEN_PREFIX } from '../auth/authenticator.ts';
import { hashSecret } from '../auth/secrets.ts';
import type { Clock } from '../clock.ts';
import { notFound } from '../errors.ts';
import type { UserPrincipal } from '../http/context.ts';
import type { Db } from '../storage/database.ts';
import type { ApiTokenRow, TokensRepository } from './tokens.repository.ts';

export const SCOPES = ['read', 'write', 'admin'] as const;
/** Tokens older than this are flagged `consider_rotating` (advisory; they keep working). */
export const ROTATE_AFTER_MICROS = 365 * 24 * 3600 * 1_000_000;

/** User API tokens (`ua_live_`): docs/api/auth.md. */
export class TokensService {
  constructor(
    private readonly deps: { db: Db; clock: Clock; tokens: TokensRepository; audit: AuditRepository },
  ) {}

  async create(
    by: UserPrincipal,
    label: string,
    scope: ApiTokenRow['scope'],
  ): Promise<{ row: ApiTokenRow; token: string }> {
    const { db, clock, tokens, audit } = this.deps;
    const token = newSecret(USER_TOKEN_PREFIX);
    const now = clock.nowMicros();
    const row: ApiTokenRow = {
      id: newId('tok'),
      account_id: by.accountId,
      user_id: by.userId,
      label,
      scope,
      token_hash: hashSecret(token),
      created_at: now,
      last_used_at: null,
      revoked_at: null,
    };
    await db.transaction().execute(async (trx) => {
      await tokens.insert(trx, row);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'token.created',
        by: by.userId,
        target: row.id,
        details: { label, scope },
        ts: now,
      });
    });
    return { row, token };
  }

  async revoke(by: UserPrincipal, id: string): Promise<void> {
    const { db, clock, tokens, audit } = this.deps;
    await db.transaction().execute(async (trx) => {
      const row = await tokens.findLive(trx, by.accountId, id);
      if (!row) throw notFound('token');
      const now = clock.nowMicros();
      if (!(await tokens.revoke(trx, id, now))) throw notFound('token');
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'token.revoked',
        by: by.userId,
        target: id,
        details: { label: row.label },
        ts: now,
      });
    });
  }

  considerRotating(row: ApiTokenRow): boolean {
    return this.deps.clock.nowMicros() - row.created_at > ROTATE_AFTER_MICROS;
  }
}
