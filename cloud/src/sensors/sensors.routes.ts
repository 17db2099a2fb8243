import { z } from 'zod';
import type { DevicesService } from '../devices/devices.service.ts';
import { param, userOf } from '../http/context.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput } from '../http/validate.ts';
import type { SensorsService } from './sensors.service.ts';
import { sensorView } from './sensors.view.ts';

const nonNegative = z.number().min(0, 'must not be negative');
const PatchSensor = z.strictObject({
  ok_min: z.number().optional(),
  ok_max: z.number().optional(),
  // whole minutes: the column is an integer (a fraction was a 500 on PostgreSQL)
  grace_min: nonNegative.int().optional(),
  rule_enabled: z.boolean().optional(),
  no_data_min: nonNegative
    .int()
    .min(1)
    .max(7 * 24 * 60)
    .optional(),
});

/** What these routes use; the composition root passes them in. */
export interface SensorRoutesDeps {
  devices: DevicesService;
  sensors: SensorsService;
}

export function sensorRoutes(s: SensorRoutesDeps): RouteDef[] {
  const { devices, sensors } = s;
  return [
    {
      method: 'get',
      path: '/v1/devices/:device_id/sensors',
      auth: 'user',
      summary: "List a device's sensors (each with its channel id and rule)",
      success: { status: 200, description: '{data: [sensor objects]}' },
      errors: ['device_not_found'],
      handler: async (req) => {
        const device = await devices.get(userOf(req.ctx).accountId, param(req, 'device_id'));
        const rows = await sensors.listForDevice(device.id);
        const severities = await sensors.alertSeverities(rows.map((r) => r.seq));
        return {
          status: 200,
          body: {
            data: rows.map((r) => sensorView(r, severities.get(r.seq) ?? null)),
            next_cursor: null,
            has_more: false,
          },
        };
      },
    },
    {
      method: 'get',
      path: '/v1/sensors/:sensor_id',
      auth: 'user',
      summary: 'Get a sensor',
      success: { status: 200, description: 'the sensor' },
      errors: ['sensor_not_found'],
      handler: async (req) => {
        const row = await sensors.get(userOf(req.ctx).accountId, param(req, 'sensor_id'));
        const severity = (await sensors.alertSeverities([row.seq])).get(row.seq) ?? null;
        return { status: 200, body: sensorView(row, severity) };
      },
    },
    {
      method: 'patch',
      path: '/v1/sensors/:sensor_id',
      auth: 'user',
      summary: "Change a sensor's rule (audit-logged with the previous rule)",
      requestBody: PatchSensor,
      success: { status: 200, description: 'the updated sensor' },
      errors: ['sensor_not_found', 'invalid_range', 'grace_too_long'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        await sensors.find(user.accountId, param(req, 'sensor_id')); // 404 before 400
        const body = parseInput(PatchSensor, req.body, 'body');
        const row = await sensors.updateRule(user, param(req, 'sensor_id'), body);
        const severity = (await sensors.alertSeverities([row.seq])).get(row.seq) ?? null;
        return { status: 200, body: sensorView(row, severity) };
      },
    },
  ];
}
