import { userOf } from '../http/context.ts';
import type { RouteDef } from '../http/route-table.ts';
import type { Db } from '../storage/database.ts';
import type { AuditRepository } from './audit.repository.ts';
import { verifyAuditChain } from './audit.service.ts';

export interface AuditRoutesDeps {
  db: Db;
  audit: AuditRepository;
}

export function auditRoutes(s: AuditRoutesDeps): RouteDef[] {
  const { db, audit } = s;
  return [
    {
      method: 'get',
      path: '/v1/audit/verify',
      auth: 'user',
      scope: 'admin',
      summary: 'Walks the account’s audit hash chain and answers the first broken link, if any',
      success: {
        status: 200,
        description:
          '{ok: true, entries, head: {id, hash}} or {ok: false, entries_checked, first_broken: {id, ts, kind, reason}}',
      },
      handler: async (req) => ({
        status: 200,
        body: await verifyAuditChain(db, audit, userOf(req.ctx).accountId),
      }),
    },
  ];
}
