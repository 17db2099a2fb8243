import { z } from 'zod';
import { param, userOf } from '../http/context.ts';
import { name } from '../http/inputs.ts';
import { pageQuerySchema, pageRequest, toPage, byCreation } from '../http/pagination.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput, siteOfBodyFirst } from '../http/validate.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';
import type { BridgesRepository } from './bridges.repository.ts';
import type { BridgesService } from './bridges.service.ts';

const CreateBridge = z.strictObject({ site_id: z.string().min(1), name });
const ListBridges = z.object(pageQuerySchema);

/** What these routes use; the composition root passes them in. */
export interface BridgeRoutesDeps {
  db: Db;
  bridges: BridgesService;
  bridgesRepository: BridgesRepository;
  sites: SitesRepository;
}

/**
 * MQTT bridges (docs/api/mqtt.md). Creating and deleting one needs the
 * admin scope: a bridge certificate is a credential into the account, like a token or an
 * integration, which `write` does not manage (docs/api/auth.md).
 */
export function bridgeRoutes(s: BridgeRoutesDeps): RouteDef[] {
  const { db, bridges, bridgesRepository, sites } = s;
  return [
    {
      method: 'post',
      path: '/v1/bridges',
      auth: 'user',
      scope: 'admin',
      secretInResponse: true,
      summary: 'Add an MQTT bridge for a site: issues its client certificate and answers the key once',
      requestBody: CreateBridge,
      success: {
        status: 201,
        description:
          '{id, site_id, name, topic_root, mqtt_url, cert_serial, cert_fingerprint, expires_at, created_at, connected, last_seen_at, cert_pem, key_pem (once), ca_pem}',
      },
      errors: ['site_not_found', 'invalid_request', 'idempotency_secret_withheld'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        await siteOfBodyFirst(req.body, async (siteId) =>
          Boolean(await sites.find(db, user.accountId, siteId)),
        );
        const body = parseInput(CreateBridge, req.body, 'body');
        return { status: 201, body: bridges.createdView(await bridges.create(user, body)) };
      },
    },
    {
      method: 'get',
      path: '/v1/bridges',
      auth: 'user',
      summary: "List the account's MQTT bridges with their connection state",
      query: ListBridges,
      success: { status: 200, description: 'list envelope of bridge objects (no keys)' },
      handler: async (req) => {
        const q = parseInput(ListBridges, req.query, 'query');
        const rows = await bridgesRepository.list(db, userOf(req.ctx).accountId, pageRequest(q));
        const connected = await bridges.connectedAmong(rows);
        return {
          status: 200,
          body: toPage(rows, q.limit, byCreation, (r) => bridges.view(r, connected.has(r.id))),
        };
      },
    },
    {
      method: 'get',
      path: '/v1/bridges/:bridge_id',
      auth: 'user',
      summary: 'Get an MQTT bridge',
      success: { status: 200, description: 'the bridge object' },
      errors: ['bridge_not_found'],
      handler: async (req) => {
        const row = await bridges.get(userOf(req.ctx).accountId, param(req, 'bridge_id'));
        const connected = await bridges.connectedAmong([row]);
        return { status: 200, body: bridges.view(row, connected.has(row.id)) };
      },
    },
    {
      method: 'delete',
      path: '/v1/bridges/:bridge_id',
      auth: 'user',
      scope: 'admin',
      summary: 'Delete an MQTT bridge: revokes its certificate and drops its live connections',
      success: { status: 204, description: 'revoked' },
      errors: ['bridge_not_found'],
      handler: async (req) => {
        await bridges.revoke(userOf(req.ctx), param(req, 'bridge_id'));
        return { status: 204 };
      },
    },
  ];
}
