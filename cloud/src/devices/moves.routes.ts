import { z } from 'zod';
import { notFound } from '../errors.ts';
import { param, userOf } from '../http/context.ts';
import { timestamp } from '../http/inputs.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput } from '../http/validate.ts';
import type { PublicService } from '../public/public.service.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';
import type { DevicesService } from './devices.service.ts';
import { deviceView } from './devices.view.ts';
import type { DeviceMovesService } from './moves.service.ts';

const MoveDevice = z.strictObject({ to_site_id: z.string().min(1), effective_at: timestamp });

/** What these routes use; the composition root passes them in. */
export interface DeviceMoveRoutesDeps {
  db: Db;
  devices: DevicesService;
  deviceMoves: DeviceMovesService;
  sites: SitesRepository;
  publicApi: Pick<PublicService, 'settingsOf'>;
}

export function deviceMoveRoutes(s: DeviceMoveRoutesDeps): RouteDef[] {
  const { db, devices, deviceMoves, sites } = s;
  return [
    {
      method: 'post',
      path: '/v1/devices/:device_id/move',
      auth: 'user',
      summary:
        'Move a device to another site from effective_at on (past or future); earlier measurements stay with the old site',
      requestBody: MoveDevice,
      success: { status: 200, description: 'the device; site_id is its site at the current time' },
      errors: [
        'device_not_found',
        'site_not_found',
        'invalid_request',
        'local_id_taken',
        'invalid_effective_at',
      ],
      handler: async (req) => {
        const user = userOf(req.ctx);
        const deviceId = param(req, 'device_id');
        // 404 before 400 (docs/api.md): the device, then a foreign target site.
        await devices.get(user.accountId, deviceId);
        const raw = req.body as { to_site_id?: unknown } | undefined;
        if (typeof raw?.to_site_id === 'string' && !(await sites.find(db, user.accountId, raw.to_site_id)))
          throw notFound('site');
        const body = parseInput(MoveDevice, req.body, 'body');
        const moved = await deviceMoves.move(user, deviceId, body);
        const published = await s.publicApi.settingsOf([deviceId]);
        return { status: 200, body: deviceView(moved, published.get(deviceId)) };
      },
    },
  ];
}
