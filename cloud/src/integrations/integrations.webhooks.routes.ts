import { CHIRPSTACK_EVENTS } from '../../../shared/lorawan/chirpstack-events.ts';
import { z } from 'zod';
import { bearerToken } from '../http/credentials.ts';
import type { RouteDef } from '../http/route-table.ts';
import type { IntegrationWebhooks } from './integration-webhooks.ts';

const ChirpstackQuery = z.object({ event: z.enum(CHIRPSTACK_EVENTS) });
const DELIVERY = '{device_id, accepted, deduplicated, channels}; {recorded} or {ignored} for other events';

/** What these routes use; the composition root passes them in. */
export interface IntegrationWebhookRoutesDeps {
  integrationWebhooks: IntegrationWebhooks;
}

/**
 * The LoRaWAN network servers' way in (docs/api/integrations.md): authenticated by the
 * integration's `whk_` token in `Authorization: Bearer`, checked by the handler, which also reads
 * the raw body (ChirpStack may send protobuf).
 */
export function integrationWebhookRoutes(s: IntegrationWebhookRoutesDeps): RouteDef[] {
  const { integrationWebhooks } = s;
  return [
    {
      method: 'post',
      path: '/v1/webhooks/chirpstack',
      auth: 'none',
      body: 'raw',
      summary:
        'ChirpStack v4 HTTP integration (integration token as Bearer): up events become measurements; JSON or protobuf',
      query: ChirpstackQuery,
      success: { status: 200, description: DELIVERY },
      errors: ['token_invalid', 'forbidden', 'bad_json', 'invalid_request', 'unsupported_media_type'],
      handler: (req) =>
        integrationWebhooks.chirpstack(
          bearerToken(req.headers.authorization),
          req.query.event,
          req.get('content-type'),
          req.ctx.rawBody,
          req.ctx.log,
        ),
    },
    {
      method: 'post',
      path: '/v1/webhooks/ttn',
      auth: 'none',
      body: 'raw',
      summary: 'The Things Stack v3 webhook (integration token as Bearer): uplink messages and join accepts',
      success: { status: 200, description: DELIVERY },
      errors: ['token_invalid', 'forbidden', 'bad_json'],
      handler: (req) =>
        integrationWebhooks.ttn(bearerToken(req.headers.authorization), req.ctx.rawBody, req.ctx.log),
    },
  ];
}
