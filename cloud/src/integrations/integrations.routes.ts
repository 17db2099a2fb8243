import { z } from 'zod';
import { param, userOf } from '../http/context.ts';
import { name } from '../http/inputs.ts';
import { pageQuerySchema, pageRequest, toPage, byCreation } from '../http/pagination.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput, siteOfBodyFirst } from '../http/validate.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';
import type { IntegrationsRepository } from './integrations.repository.ts';
import { INTEGRATION_KINDS, type IntegrationsService } from './integrations.service.ts';

const CreateIntegration = z.strictObject({
  kind: z.enum(INTEGRATION_KINDS),
  site_id: z.string().min(1),
  name,
  model: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .describe('model of the devices it creates (GET /v1/models); default: lorawan-generic or shelly-ht-gen1'),
});
const ListIntegrations = z.object(pageQuerySchema);

const WITH_TOKEN =
  '{id, kind, site_id, name, model, url, created_at, token_issued_at, last_used_at, token (once)}';

/** What these routes use; the composition root passes them in. */
export interface IntegrationRoutesDeps {
  db: Db;
  integrations: IntegrationsService;
  integrationsRepository: IntegrationsRepository;
  sites: SitesRepository;
}

/**
 * Inbound integrations (docs/api/integrations.md). Creating, rotating and deleting one needs the
 * admin scope: its token is a credential into the account's site, like a user token or a bridge.
 */
export function integrationRoutes(s: IntegrationRoutesDeps): RouteDef[] {
  const { db, integrations, integrationsRepository, sites } = s;
  return [
    {
      method: 'post',
      path: '/v1/integrations',
      auth: 'user',
      scope: 'admin',
      secretInResponse: true,
      summary:
        'Add an inbound integration (ChirpStack, The Things Stack, Shelly URL actions) for a site: answers its whk_ token and the URL to paste, once',
      requestBody: CreateIntegration,
      success: { status: 201, description: WITH_TOKEN },
      errors: [
        'site_not_found',
        'invalid_request',
        'unknown_model',
        'model_not_for_integration',
        'idempotency_secret_withheld',
      ],
      handler: async (req) => {
        const user = userOf(req.ctx);
        await siteOfBodyFirst(req.body, async (siteId) =>
          Boolean(await sites.find(db, user.accountId, siteId)),
        );
        const body = parseInput(CreateIntegration, req.body, 'body');
        const { row, token } = await integrations.create(user, body);
        return { status: 201, body: integrations.withToken(row, token) };
      },
    },
    {
      method: 'get',
      path: '/v1/integrations',
      auth: 'user',
      summary: "List the account's inbound integrations (without their tokens)",
      query: ListIntegrations,
      success: { status: 200, description: 'list envelope of integration objects' },
      errors: ['invalid_request'],
      handler: async (req) => {
        const q = parseInput(ListIntegrations, req.query, 'query');
        const rows = await integrationsRepository.list(db, userOf(req.ctx).accountId, pageRequest(q));
        return {
          status: 200,
          body: toPage(rows, q.limit, byCreation, (r) => integrations.view(r)),
        };
      },
    },
    {
      method: 'get',
      path: '/v1/integrations/:integration_id',
      auth: 'user',
      summary: 'Get an inbound integration (without its token)',
      success: { status: 200, description: 'the integration object' },
      errors: ['integration_not_found'],
      handler: async (req) => ({
        status: 200,
        body: integrations.view(
          await integrations.get(userOf(req.ctx).accountId, param(req, 'integration_id')),
        ),
      }),
    },
    {
      method: 'delete',
      path: '/v1/integrations/:integration_id',
      auth: 'user',
      scope: 'admin',
      summary: 'Delete an inbound integration: its token is refused (401) from the next request on',
      success: { status: 204, description: 'deleted' },
      errors: ['integration_not_found'],
      handler: async (req) => {
        await integrations.delete(userOf(req.ctx), param(req, 'integration_id'));
        return { status: 204 };
      },
    },
    {
      method: 'post',
      path: '/v1/integrations/:integration_id/rotate-token',
      auth: 'user',
      scope: 'admin',
      secretInResponse: true,
      summary:
        "Replace an integration's whk_ token: the old one is refused at once; the new one is answered once",
      success: { status: 200, description: WITH_TOKEN },
      errors: ['integration_not_found', 'idempotency_secret_withheld'],
      handler: async (req) => {
        const { row, token } = await integrations.rotateToken(userOf(req.ctx), param(req, 'integration_id'));
        return { status: 200, body: integrations.withToken(row, token) };
      },
    },
  ];
}
