import { z } from 'zod';
import { formatSeconds, formatSecondsOrNull } from '../../../shared/time.ts';
import { Unprocessable } from '../errors.ts';
import { param, userOf } from '../http/context.ts';
import { name } from '../http/inputs.ts';
import { pageQuerySchema, pageRequest, toPage, byCreation } from '../http/pagination.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput } from '../http/validate.ts';
import type { Db } from '../storage/database.ts';
import type { ApiTokenRow, TokensRepository } from './tokens.repository.ts';
import { SCOPES, type TokensService } from './tokens.service.ts';

const CreateToken = z.strictObject({ label: name, scope: z.string() });
const ListTokens = z.object(pageQuerySchema);

function isScope(value: string): value is ApiTokenRow['scope'] {
  return (SCOPES as readonly string[]).includes(value);
}

/** What these routes use; the composition root passes them in. */
export interface TokenRoutesDeps {
  db: Db;
  tokens: TokensService;
  tokensRepository: TokensRepository;
}

export function tokenRoutes(s: TokenRoutesDeps): RouteDef[] {
  const { db, tokens, tokensRepository } = s;
  const view = (row: ApiTokenRow) => ({
    id: row.id,
    label: row.label,
    scope: row.scope,
    created_at: formatSeconds(row.created_at),
    last_used_at: formatSecondsOrNull(row.last_used_at),
    consider_rotating: tokens.considerRotating(row),
  });
  return [
    {
      method: 'post',
      secretInResponse: true,
      path: '/v1/tokens',
      auth: 'user-or-session',
      scope: 'admin',
      summary: 'Create a user API token (session cookie or admin token); the plaintext is answered once',
      requestBody: CreateToken,
      success: { status: 201, description: '{id, token (once), label, scope, created_at}' },
      errors: ['invalid_scope', 'idempotency_secret_withheld'],
      handler: async (req) => {
        const body = parseInput(CreateToken, req.body, 'body');
        if (!isScope(body.scope)) {
          throw new Unprocessable('invalid_scope', `scope must be one of ${SCOPES.join(', ')}`);
        }
        const created = await tokens.create(userOf(req.ctx), body.label, body.scope);
        return {
          status: 201,
          body: {
            id: created.row.id,
            token: created.token,
            label: created.row.label,
            scope: created.row.scope,
            created_at: formatSeconds(created.row.created_at),
          },
        };
      },
    },
    {
      method: 'get',
      path: '/v1/tokens',
      auth: 'user',
      // With the revocation below, on the caller's own budget, not the account's: a leaked token that
      // spends the account's must not also stop the admin from finding and revoking it.
      rateSubject: 'credential',
      summary: "List the account's tokens (never their plaintext)",
      query: ListTokens,
      success: {
        status: 200,
        description: 'list envelope of {id, label, scope, created_at, last_used_at, consider_rotating}',
      },
      handler: async (req) => {
        const q = parseInput(ListTokens, req.query, 'query');
        const rows = await tokensRepository.list(db, userOf(req.ctx).accountId, pageRequest(q));
        return { status: 200, body: toPage(rows, q.limit, byCreation, view) };
      },
    },
    {
      method: 'delete',
      path: '/v1/tokens/:token_id',
      auth: 'user',
      scope: 'admin',
      rateSubject: 'credential',
      summary: 'Revoke a token (it gets 401 at once)',
      success: { status: 204, description: 'revoked' },
      errors: ['token_not_found'],
      handler: async (req) => {
        await tokens.revoke(userOf(req.ctx), param(req, 'token_id'));
        return { status: 204 };
      },
    },
  ];
}
