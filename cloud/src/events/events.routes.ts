import { z } from 'zod';
import { param, userOf } from '../http/context.ts';
import { queryBoolean, timestamp } from '../http/inputs.ts';
import { pageQuerySchema, pageRequest, toPage } from '../http/pagination.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput } from '../http/validate.ts';
import type { EventsService } from './events.service.ts';
import { anyEventView } from './events.view.ts';

const ListEvents = z.object({
  site_id: z.string().max(64).optional(),
  channel_id: z.string().max(64).optional(),
  sensor_id: z.string().max(64).optional(),
  state: z.enum(['open', 'resolved']).optional(),
  kind: z.enum(['threshold_high', 'threshold_low', 'no_data', 'rate_of_change']).optional(),
  rule_id: z.string().max(64).optional(),
  from: timestamp.optional(),
  to: timestamp.optional(),
  include_withdrawn: queryBoolean.optional(),
  ...pageQuerySchema,
});
const Ack = z.strictObject({ note: z.string().max(2000) });

/** What these routes use; the composition root passes them in. */
export interface EventRoutesDeps {
  events: EventsService;
}

export function eventRoutes(s: EventRoutesDeps): RouteDef[] {
  const { events } = s;
  return [
    {
      method: 'get',
      path: '/v1/events',
      auth: 'user',
      summary:
        'Alarm events of sensor rules and alert rules, newest first (filters: site_id, channel_id, sensor_id, rule_id, state, kind, from/to on started_at)',
      query: ListEvents,
      success: { status: 200, description: 'list envelope of alarm events' },
      errors: [
        'invalid_request',
        'site_not_found',
        'channel_not_found',
        'sensor_not_found',
        'alert_rule_not_found',
      ],
      handler: async (req) => {
        const user = userOf(req.ctx);
        const q = parseInput(ListEvents, req.query, 'query');
        const rows = await events.list(
          {
            accountId: user.accountId,
            siteId: q.site_id,
            channelId: q.channel_id,
            sensorId: q.sensor_id,
            state: q.state,
            kind: q.kind,
            ruleId: q.rule_id,
            from: q.from,
            to: q.to,
            includeWithdrawn: q.include_withdrawn ?? false,
          },
          pageRequest(q),
        );
        return { status: 200, body: toPage(rows, q.limit, (r) => [r.started_at, r.id], anyEventView) };
      },
    },
    {
      method: 'get',
      path: '/v1/events/:event_id',
      auth: 'user',
      summary: 'An alarm event',
      success: { status: 200, description: 'the alarm event' },
      errors: ['event_not_found'],
      handler: async (req) => ({
        status: 200,
        body: anyEventView(await events.get(userOf(req.ctx).accountId, param(req, 'event_id'))),
      }),
    },
    {
      method: 'post',
      path: '/v1/events/:event_id/ack',
      auth: 'user',
      summary: 'Acknowledge an alarm event with a note (once; audit-logged)',
      requestBody: Ack,
      success: { status: 200, description: 'the acknowledged event' },
      errors: ['event_not_found', 'invalid_request', 'already_acknowledged'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        await events.get(user.accountId, param(req, 'event_id')); // 404 before 400
        const body = parseInput(Ack, req.body, 'body');
        return {
          status: 200,
          body: anyEventView(await events.acknowledge(user, param(req, 'event_id'), body.note)),
        };
      },
    },
  ];
}
