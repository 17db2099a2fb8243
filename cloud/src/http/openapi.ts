import { z } from 'zod';
import type { Config } from '../config.ts';
import { rateFamily, requiredScope, type RouteDef } from './route-table.ts';

/**
 * The OpenAPI 3.1 document, generated from the route table and the zod schemas the handlers parse
 * with, so the reference cannot drift from the code. Served at `GET /v1/openapi.json`.
 */

/** The HTTP status of every error code (docs/api.md). */
const STATUS_OF: Record<string, number> = {
  bad_json: 400,
  invalid_request: 400,
  invalid_measurement: 400,
  no_measurements: 400,
  invalid_bbox: 400,
  auth_required: 401,
  token_invalid: 401,
  code_invalid: 401,
  forbidden: 403,
  device_not_in_token: 403,
  local_id_taken: 409,
  idempotency_conflict: 409,
  idempotency_secret_withheld: 409,
  site_not_empty: 409,
  already_acknowledged: 409,
  report_not_ready: 409,
  payload_too_large: 413,
  out_of_range: 422,
  unknown_kind: 422,
  invalid_range: 422,
  grace_too_long: 422,
  unknown_model: 422,
  model_not_for_integration: 422,
  unknown_vertical: 422,
  invalid_scope: 422,
  invalid_webhook_url: 422,
  unknown_template: 422,
  unknown_language: 422,
  invalid_period: 422,
  rate_limited: 429,
  internal: 500,
  db_unavailable: 503,
  not_ready: 503,
  overloaded: 503,
};

export function statusOfCode(code: string): number {
  return STATUS_OF[code] ?? (code.endsWith('_not_found') ? 404 : 400);
}

function jsonSchema(schema: z.ZodType): unknown {
  return z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' });
}

const ERROR_SCHEMA = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message', 'request_id'],
      properties: {
        code: { type: 'string' },
        message: { type: 'string' },
        request_id: { type: 'string', pattern: '^req_' },
        details: {
          type: 'array',
          items: { type: 'object', properties: { path: { type: 'string' }, message: { type: 'string' } } },
        },
      },
    },
  },
};

function errorsOf(route: RouteDef): string[] {
  const codes = new Set<string>(route.errors ?? []);
  if (route.auth === 'user' || route.auth === 'user-or-session' || route.auth === 'session') {
    codes.add('auth_required').add('token_invalid');
    if (route.auth !== 'session') codes.add('forbidden');
  }
  if (route.auth === 'device') codes.add('token_invalid').add('forbidden');
  if (route.query || route.requestBody) codes.add('invalid_request');
  if (route.requestBody) codes.add('bad_json');
  if (rateFamily(route)) codes.add('rate_limited');
  if (route.method !== 'get' && route.auth !== 'none') codes.add('idempotency_conflict');
  return [...codes];
}

export function openApiDocument(routes: readonly RouteDef[], config: Config): unknown {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const path = route.path.replace(/:(\w+)/g, '{$1}');
    const parameters: unknown[] = [...route.path.matchAll(/:(\w+)/g)].map((m) => ({
      name: m[1],
      in: 'path',
      required: true,
      schema: { type: 'string' },
    }));
    if (route.query) {
      const schema = jsonSchema(route.query) as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, property] of Object.entries(schema.properties ?? {})) {
        parameters.push({
          name,
          in: 'query',
          required: schema.required?.includes(name) ?? false,
          schema: property,
        });
      }
    }
    if (route.method !== 'get' && route.auth !== 'none') {
      parameters.push({
        name: 'Idempotency-Key',
        in: 'header',
        required: false,
        schema: { type: 'string', maxLength: 128 },
        description: 'Replays the first answer for 24 hours (Idempotent-Replayed: true).',
      });
    }
    const responses: Record<string, unknown> = {
      [String(route.success?.status ?? (route.method === 'post' ? 201 : 200))]: {
        description: route.success?.description ?? 'success',
      },
    };
    const byStatus = new Map<number, string[]>();
    for (const code of errorsOf(route)) {
      const status = statusOfCode(code);
      byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
    }
    for (const [status, codes] of [...byStatus].sort((a, b) => a[0] - b[0])) {
      responses[String(status)] = {
        description: `error codes: ${codes.join(', ')}`,
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      };
    }
    const security =
      route.auth === 'none'
        ? []
        : route.auth === 'session'
          ? [{ session: [] }]
          : route.auth === 'user-or-session'
            ? [{ bearer: [] }, { session: [] }]
            : [{ bearer: [] }];
    const family = rateFamily(route);
    paths[path] ??= {};
    paths[path][route.method] = {
      summary: route.summary,
      description: [
        route.auth === 'user' || route.auth === 'user-or-session' ? `Scope: ${requiredScope(route)}.` : '',
        route.auth === 'device' ? 'Device token (ds_live_).' : '',
        family ? `Rate-limit family: ${family}.` : '',
      ]
        .filter(Boolean)
        .join(' '),
      security,
      parameters,
      ...(route.requestBody
        ? {
            requestBody: {
              required: true,
              content: { 'application/json': { schema: jsonSchema(route.requestBody) } },
            },
          }
        : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Sensor monitoring API',
      version: '1',
      description:
        'Generated from the route table. Errors are {error: {code, message, request_id}}; every answer carries X-Request-Id. See docs/api.md for the conventions.',
    },
    servers: [{ url: config.baseUrl }],
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'ua_live_ user token, or ds_live_ device token on ingest',
        },
        session: { type: 'apiKey', in: 'cookie', name: 'os_session' },
      },
      schemas: { Error: ERROR_SCHEMA },
    },
    paths,
  };
}
