import { z } from 'zod';
import { param, userOf } from '../http/context.ts';
import { timestamp } from '../http/inputs.ts';
import { pageQuerySchema, pageRequest, toPage } from '../http/pagination.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput } from '../http/validate.ts';
import type { SensorsService } from '../sensors/sensors.service.ts';
import { silenceView, type SilencesService } from './silences.service.ts';

const CreateSilence = z.strictObject({
  from: timestamp,
  to: timestamp,
  reason: z.string().trim().min(1).max(500),
});
const ListSilences = z.object(pageQuerySchema);

/** What these routes use; the composition root passes them in. */
export interface SilenceRoutesDeps {
  silences: SilencesService;
  sensors: SensorsService;
}

export function silenceRoutes(s: SilenceRoutesDeps): RouteDef[] {
  const { silences } = s;
  return [
    {
      method: 'post',
      path: '/v1/sensors/:sensor_id/silence',
      auth: 'user',
      summary: "Silence a sensor's notifications for a window (events are still recorded, silenced: true)",
      requestBody: CreateSilence,
      success: { status: 201, description: 'the silence window' },
      errors: ['sensor_not_found', 'invalid_request', 'invalid_range'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        const sensorId = param(req, 'sensor_id');
        await s.sensors.find(user.accountId, sensorId); // 404 before 400
        const body = parseInput(CreateSilence, req.body, 'body');
        return { status: 201, body: silenceView(await silences.create(user, sensorId, body)) };
      },
    },
    {
      method: 'get',
      path: '/v1/sensors/:sensor_id/silences',
      auth: 'user',
      summary: "A sensor's silence windows, newest first",
      query: ListSilences,
      success: { status: 200, description: 'list envelope of silence windows' },
      errors: ['sensor_not_found', 'invalid_request'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        const sensorId = param(req, 'sensor_id');
        await s.sensors.find(user.accountId, sensorId);
        const q = parseInput(ListSilences, req.query, 'query');
        const rows = await silences.list(user.accountId, sensorId, pageRequest(q));
        return { status: 200, body: toPage(rows, q.limit, (r) => [r.from_ts, r.id], silenceView) };
      },
    },
    {
      method: 'delete',
      path: '/v1/silences/:silence_id',
      auth: 'user',
      summary: 'End a silence window now (one not yet begun is cancelled)',
      success: { status: 204, description: 'ended' },
      errors: ['silence_not_found'],
      handler: async (req) => {
        await silences.end(userOf(req.ctx), param(req, 'silence_id'));
        return { status: 204 };
      },
    },
  ];
}
