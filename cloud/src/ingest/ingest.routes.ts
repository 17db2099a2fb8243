import type { Request, Response } from 'express';
import { IngestBodySchema } from '../../../shared/ingest.ts';
import { ShellyQuerySchema } from '../../../shared/shelly.ts';
import type { RouteDef } from '../http/route-table.ts';
import { ingestHandlers, type IngestExchange, type IngestHandlerDeps } from './ingest.handlers.ts';

/** The Express side of an exchange: the request's context carries the principal for the access log. */
function expressExchange(req: Request, res: Response): IngestExchange {
  return {
    rawBody: req.ctx.rawBody,
    query: req.query,
    header: (name) => req.get(name),
    get principal() {
      return req.ctx.principal;
    },
    set principal(p) {
      req.ctx.principal = p;
    },
    setHeaders: (headers) => res.set(headers),
    log: req.ctx.log,
  };
}

/** Protocol adapters for HTTP ingest: they translate into an IngestItem and answer the outcome. */
export function ingestRoutes(s: IngestHandlerDeps): RouteDef[] {
  const handlers = ingestHandlers(s);
  return [
    {
      method: 'post',
      path: '/v1/ingest',
      auth: 'device',
      inlineAuth: true,
      summary: 'Submit 1 to 32 measurements of one device (device token)',
      requestBody: IngestBodySchema,
      success: {
        status: 200,
        description: '{accepted, deduplicated, channels: [{type, label, channel_id}]}',
      },
      errors: [
        'bad_json',
        'invalid_request',
        'invalid_measurement',
        'no_measurements',
        'device_not_in_token',
        'unknown_kind',
        'out_of_range',
        'idempotency_conflict',
        'overloaded',
      ],
      // On the Idempotency-Key path the pipeline has authenticated and parsed the body already.
      handler: (req, res) =>
        handlers.post(
          expressExchange(req, res),
          req.ctx.principal !== null ? (req.body as unknown) : undefined,
        ),
    },
    {
      method: 'get',
      path: '/v1/ingest/shelly',
      auth: 'device',
      inlineAuth: true,
      queryToken: true,
      summary: 'Shelly URL-action ingest: values in the query string (token in the query allowed)',
      query: ShellyQuerySchema,
      success: { status: 200, description: '{accepted, deduplicated, channels}, as POST /v1/ingest' },
      errors: ['invalid_request', 'no_measurements', 'device_not_in_token', 'out_of_range', 'overloaded'],
      handler: (req, res) => handlers.shelly(expressExchange(req, res)),
    },
  ];
}
