import { z } from 'zod';
import { formatSeconds } from '../../../shared/time.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import { auditView } from '../audit/audit.view.ts';
import { notFound } from '../errors.ts';
import { userOf } from '../http/context.ts';
import { timestamp } from '../http/inputs.ts';
import { pageQuerySchema, pageRequest, toPage } from '../http/pagination.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput } from '../http/validate.ts';
import type { Db } from '../storage/database.ts';
import type { AccountsRepository } from './accounts.repository.ts';

const ListAudit = z.object({
  from: timestamp.optional(),
  to: timestamp.optional(),
  kind: z.string().max(64).optional(),
  ...pageQuerySchema,
});

/** What these routes use; the composition root passes them in. */
export interface AccountRoutesDeps {
  db: Db;
  accounts: AccountsRepository;
  audit: AuditRepository;
}

export function accountRoutes(s: AccountRoutesDeps): RouteDef[] {
  const { db, accounts, audit } = s;
  return [
    {
      method: 'get',
      path: '/v1/accounts/me',
      auth: 'user',
      // The dashboard opens with it: on the caller's own budget, so that the admin can reach the
      // tokens page while a leaked token spends the account's (see /v1/tokens).
      rateSubject: 'credential',
      summary: 'The caller’s account and its users',
      success: { status: 200, description: '{id, name, created_at, users}' },
      handler: async (req) => {
        const user = userOf(req.ctx);
        const account = await accounts.findAccount(db, user.accountId);
        if (!account) throw notFound('account');
        const users = await accounts.listUsers(db, account.id);
        return {
          status: 200,
          body: {
            id: account.id,
            name: account.name,
            created_at: formatSeconds(account.created_at),
            users: users.map((u) => ({ id: u.id, email: u.email, created_at: formatSeconds(u.created_at) })),
          },
        };
      },
    },
    {
      method: 'get',
      path: '/v1/accounts/me/audit',
      auth: 'user',
      summary: 'The audit trail, newest first (from inclusive, to exclusive)',
      query: ListAudit,
      success: {
        status: 200,
        description: 'list envelope of {id, ts, kind, by, target, details}, newest first',
      },
      handler: async (req) => {
        const q = parseInput(ListAudit, req.query, 'query');
        const rows = await audit.list(db, userOf(req.ctx).accountId, q, pageRequest(q));
        return { status: 200, body: toPage(rows, q.limit, (r) => [r.ts, r.id], auditView) };
      },
    },
  ];
}
