import { z } from 'zod';
import { formatSeconds, formatSecondsOrNull } from '../../../shared/time.ts';
import { param, userOf } from '../http/context.ts';
import { pageQuerySchema, pageRequest, toPage, byCreation } from '../http/pagination.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput } from '../http/validate.ts';
import type { Db } from '../storage/database.ts';
import type { AttemptRow, DeliveryRow, WebhooksRepository } from './webhooks.repository.ts';
import { WEBHOOK_EVENT_TYPES, webhookView, type WebhooksService } from './webhooks.service.ts';

const CreateWebhook = z.strictObject({
  url: z.string().min(1).max(2048),
  events: z.array(z.enum(WEBHOOK_EVENT_TYPES)).min(1).max(WEBHOOK_EVENT_TYPES.length),
});
const Page = z.object(pageQuerySchema);

function deliveryView(d: DeliveryRow, attempts: AttemptRow[]) {
  return {
    id: d.id,
    type: d.type,
    state: d.state,
    created_at: formatSeconds(d.created_at),
    attempts: attempts.map((a) => ({
      attempt: a.attempt,
      at: formatSeconds(a.at),
      status: a.status,
      error: a.error,
      duration_ms: a.duration_ms,
    })),
    next_attempt_at: formatSecondsOrNull(d.next_attempt_at),
    delivered_at: formatSecondsOrNull(d.delivered_at),
  };
}

/** What these routes use; the composition root passes them in. */
export interface WebhookRoutesDeps {
  db: Db;
  webhooks: WebhooksService;
  webhooksRepository: WebhooksRepository;
}

export function webhookRoutes(s: WebhookRoutesDeps): RouteDef[] {
  const { webhooks, webhooksRepository, db } = s;
  return [
    {
      method: 'post',
      path: '/v1/webhooks',
      auth: 'user',
      scope: 'admin',
      secretInResponse: true,
      summary: 'Register an outbound webhook; answers its signing secret once',
      requestBody: CreateWebhook,
      success: { status: 201, description: '{id, url, events, secret, created_at}' },
      errors: ['invalid_request', 'invalid_webhook_url', 'idempotency_secret_withheld'],
      handler: async (req) => {
        const body = parseInput(CreateWebhook, req.body, 'body');
        const row = await webhooks.create(userOf(req.ctx), body);
        return { status: 201, body: { ...webhookView(row), secret: row.secret } };
      },
    },
    {
      method: 'get',
      path: '/v1/webhooks',
      auth: 'user',
      summary: "The account's outbound webhooks (without their secrets)",
      query: Page,
      success: { status: 200, description: 'list envelope of webhooks' },
      errors: ['invalid_request'],
      handler: async (req) => {
        const q = parseInput(Page, req.query, 'query');
        const rows = await webhooksRepository.list(db, userOf(req.ctx).accountId, pageRequest(q));
        return { status: 200, body: toPage(rows, q.limit, byCreation, webhookView) };
      },
    },
    {
      method: 'delete',
      path: '/v1/webhooks/:webhook_id',
      auth: 'user',
      scope: 'admin',
      summary: 'Delete an outbound webhook; its pending deliveries are cancelled',
      success: { status: 204, description: 'deleted' },
      errors: ['webhook_not_found'],
      handler: async (req) => {
        await webhooks.delete(userOf(req.ctx), param(req, 'webhook_id'));
        return { status: 204 };
      },
    },
    {
      method: 'get',
      path: '/v1/webhooks/:webhook_id/deliveries',
      auth: 'user',
      summary: "A webhook's deliveries, newest first, each with every attempt",
      query: Page,
      success: { status: 200, description: 'list envelope of deliveries' },
      errors: ['webhook_not_found', 'invalid_request'],
      handler: async (req) => {
        const webhook = await webhooks.get(userOf(req.ctx).accountId, param(req, 'webhook_id'));
        const q = parseInput(Page, req.query, 'query');
        const rows = await webhooksRepository.deliveries(db, webhook.id, pageRequest(q));
        const attempts = await webhooksRepository.attempts(
          db,
          rows.map((r) => r.id),
        );
        return {
          status: 200,
          body: toPage(rows, q.limit, byCreation, (r) =>
            deliveryView(
              r,
              attempts.filter((a) => a.delivery_id === r.id),
            ),
          ),
        };
      },
    },
  ];
}
