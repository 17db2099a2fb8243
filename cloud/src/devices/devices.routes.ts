import { z } from 'zod';
import { formatSeconds } from '../../../shared/time.ts';
import { InvalidRequest, notFound } from '../errors.ts';
import { param, userOf } from '../http/context.ts';
import { name, queryBoolean } from '../http/inputs.ts';
import { pageQuerySchema, pageRequest, toPage } from '../http/pagination.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput, siteOfBodyFirst } from '../http/validate.ts';
import type { BridgeConnections, MqttBridge } from '../mqtt/mqtt-bridge.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';
import type { DevicesRepository } from './devices.repository.ts';
import type { DevicesService, IssuedToken } from './devices.service.ts';
import { deviceView } from './devices.view.ts';
import { identifyDevice } from './identify.ts';
import { DEVICE_MODELS } from './models.ts';

const localId = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');
const notes = z.string().max(4000);

const CreateDevice = z.strictObject({
  site_id: z.string(),
  local_id: localId,
  name,
  model: z.string().min(1),
  notes: notes.optional(),
});
const PatchDevice = z.strictObject({
  name: name.optional(),
  local_id: localId.optional(),
  notes: notes.optional(),
});
const ListDevices = z.object({
  site_id: z.string().optional(),
  account_id: z.string().optional(),
  online: queryBoolean.optional(),
  model: z.string().max(64).optional(),
  ...pageQuerySchema,
});

function issuedView(issued: IssuedToken) {
  return {
    ...deviceView(issued.device),
    ingest_token: issued.token,
    ingest_url: issued.ingestUrl,
    issued_at: formatSeconds(issued.device.token_issued_at),
  };
}

/** What these routes use; the composition root passes them in. */
export interface DeviceRoutesDeps {
  db: Db;
  devices: DevicesService;
  devicesRepository: DevicesRepository;
  sites: SitesRepository;
  mqtt: BridgeConnections & Pick<MqttBridge, 'identifyPayload'>;
}

export function deviceRoutes(s: DeviceRoutesDeps): RouteDef[] {
  const { db, devices, sites } = s;
  return [
    {
      method: 'get',
      path: '/v1/models',
      auth: 'user',
      summary: 'List supported device models',
      success: { status: 200, description: '{data: [{model, vendor, ingest_url_kind, identify}]}' },
      handler: async () => ({
        status: 200,
        body: {
          data: DEVICE_MODELS.map(({ model, vendor, ingest_url_kind, identify }) => ({
            model,
            vendor,
            ingest_url_kind,
            identify,
          })),
        },
      }),
    },
    {
      method: 'get',
      path: '/v1/devices',
      auth: 'user',
      summary: 'List devices of a site (site_id) or of the whole account (account_id)',
      query: ListDevices,
      success: { status: 200, description: 'list envelope of devices' },
      errors: ['site_not_found', 'account_not_found'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        const q = parseInput(ListDevices, req.query, 'query');
        if (q.site_id !== undefined && !(await sites.find(db, user.accountId, q.site_id)))
          throw notFound('site');
        if (q.account_id !== undefined && q.account_id !== user.accountId && q.account_id !== 'me') {
          throw notFound('account');
        }
        if (q.site_id === undefined && q.account_id === undefined) {
          throw new InvalidRequest('invalid_request', 'site_id is required unless account_id is given', [
            { path: 'site_id', message: 'required unless account_id is given' },
          ]);
        }
        const rows = await s.devicesRepository.list(
          db,
          { accountId: user.accountId, siteId: q.site_id, online: q.online, model: q.model },
          pageRequest(q),
        );
        return { status: 200, body: toPage(rows, q.limit, (r) => [r.created_at, r.id], deviceView) };
      },
    },
    {
      method: 'post',
      secretInResponse: true,
      path: '/v1/devices',
      auth: 'user',
      summary: 'Create a device; answers its ingest token once',
      requestBody: CreateDevice,
      success: { status: 201, description: 'the device with ingest_token (once), ingest_url and issued_at' },
      errors: ['site_not_found', 'local_id_taken', 'unknown_model', 'idempotency_secret_withheld'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        await siteOfBodyFirst(req.body, async (siteId) =>
          Boolean(await sites.find(db, user.accountId, siteId)),
        );
        const body = parseInput(CreateDevice, req.body, 'body');
        return { status: 201, body: issuedView(await devices.create(user, body)) };
      },
    },
    {
      method: 'get',
      path: '/v1/devices/:device_id',
      auth: 'user',
      summary: 'Get a device',
      success: { status: 200, description: 'the device' },
      errors: ['device_not_found'],
      handler: async (req) => ({
        status: 200,
        body: deviceView(await devices.get(userOf(req.ctx).accountId, param(req, 'device_id'))),
      }),
    },
    {
      method: 'patch',
      path: '/v1/devices/:device_id',
      auth: 'user',
      summary: 'Change name, local_id or notes',
      requestBody: PatchDevice,
      success: { status: 200, description: 'the updated device' },
      errors: ['device_not_found', 'local_id_taken'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        await devices.get(user.accountId, param(req, 'device_id'));
        const body = parseInput(PatchDevice, req.body, 'body');
        return { status: 200, body: deviceView(await devices.update(user, param(req, 'device_id'), body)) };
      },
    },
    {
      method: 'delete',
      path: '/v1/devices/:device_id',
      auth: 'user',
      summary: 'Delete a device and revoke its token (its data stays until retention)',
      success: { status: 204, description: 'deleted; its token is revoked' },
      errors: ['device_not_found'],
      handler: async (req) => {
        await devices.delete(userOf(req.ctx), param(req, 'device_id'));
        return { status: 204 };
      },
    },
    {
      method: 'post',
      secretInResponse: true,
      path: '/v1/devices/:device_id/rotate-token',
      auth: 'user',
      summary: 'Issue a new ingest token; the old one stops working at once',
      success: { status: 200, description: 'the device with the new ingest_token (once) and ingest_url' },
      errors: ['device_not_found', 'idempotency_secret_withheld'],
      handler: async (req) => ({
        status: 200,
        body: issuedView(await devices.rotateToken(userOf(req.ctx), param(req, 'device_id'))),
      }),
    },
    {
      method: 'post',
      path: '/v1/devices/:device_id/identify',
      auth: 'user',
      summary: 'Blink the device LED for 30 s through the MQTT bridge of its site (best effort)',
      success: { status: 202, description: '{status: "sent" | "unsupported" | "unreachable"}' },
      errors: ['device_not_found'],
      handler: async (req) => {
        const device = await devices.get(userOf(req.ctx).accountId, param(req, 'device_id'));
        const status = await identifyDevice(device, s.mqtt, s.mqtt.identifyPayload());
        return { status: 202, body: { status } };
      },
    },
  ];
}
