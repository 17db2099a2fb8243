import { z } from 'zod';
import { formatSeconds } from '../../../shared/time.ts';
import { InvalidRequest, notFound } from '../errors.ts';
import { param, userOf } from '../http/context.ts';
import { name, queryBoolean } from '../http/inputs.ts';
import { pageQuerySchema, pageRequest, toPage, byCreation } from '../http/pagination.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput, siteOfBodyFirst } from '../http/validate.ts';
import type { BridgeConnections, MqttBridge } from '../mqtt/mqtt-bridge.ts';
import { PublicSettingsPatch, type PublicService } from '../public/public.service.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { PublicDeviceRow } from '../public/public.repository.ts';
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
  public: PublicSettingsPatch.optional(),
});
const ListDevices = z.object({
  site_id: z.string().optional(),
  account_id: z.string().optional(),
  online: queryBoolean.optional(),
  model: z.string().max(64).optional(),
  ...pageQuerySchema,
});

function issuedView(issued: IssuedToken, published: Map<string, PublicDeviceRow>) {
  return {
    ...deviceView(issued.device, published.get(issued.device.id)),
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
  /** What owners publish about their devices (the `public` field). */
  publicApi: Pick<PublicService, 'settingsOf' | 'merged' | 'save' | 'deviceRemoved' | 'dropCachedAnswers'>;
}

export function deviceRoutes(s: DeviceRoutesDeps): RouteDef[] {
  const { db, devices, sites, publicApi } = s;
  const published = (ids: string[]) => publicApi.settingsOf(ids);
  return [
    {
      method: 'get',
      path: '/v1/models',
      auth: 'user',
      summary: 'List supported device models',
      success: { status: 200, description: '{data: [{model, name, vendor, ingest_url_kind, identify}]}' },
      handler: async () => ({
        status: 200,
        body: {
          data: DEVICE_MODELS.map(({ model, name, vendor, ingest_url_kind, identify }) => ({
            model,
            name,
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
        const settings = await published(rows.map((r) => r.id));
        return {
          status: 200,
          body: toPage(rows, q.limit, byCreation, (r) => deviceView(r, settings.get(r.id))),
        };
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
        return { status: 201, body: issuedView(await devices.create(user, body), new Map()) };
      },
    },
    {
      method: 'get',
      path: '/v1/devices/:device_id',
      auth: 'user',
      summary: 'Get a device',
      success: { status: 200, description: 'the device' },
      errors: ['device_not_found'],
      handler: async (req) => {
        const device = await devices.get(userOf(req.ctx).accountId, param(req, 'device_id'));
        return { status: 200, body: deviceView(device, (await published([device.id])).get(device.id)) };
      },
    },
    {
      method: 'patch',
      path: '/v1/devices/:device_id',
      auth: 'user',
      summary: 'Change name, local_id or notes, or what the public API shows of the device (public)',
      requestBody: PatchDevice,
      success: { status: 200, description: 'the updated device' },
      errors: ['device_not_found', 'local_id_taken'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        const id = param(req, 'device_id');
        const found = await devices.get(user.accountId, id);
        const { public: publicPatch, ...body } = parseInput(PatchDevice, req.body, 'body');
        // Checked before anything changes: a public device needs its name, place and position.
        const settings = publicPatch && (await publicApi.merged(user.accountId, id, publicPatch));
        const device =
          publicPatch === undefined || Object.keys(body).length > 0
            ? await devices.update(user, id, body)
            : found;
        if (settings) await publicApi.save(user, settings);
        return { status: 200, body: deviceView(device, (await published([id])).get(id)) };
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
        const id = param(req, 'device_id');
        // Its pins leave the public API: the epoch grows in the delete's transaction (every replica),
        // this process's cached answers go after the commit.
        let wasPublic = false;
        await devices.delete(userOf(req.ctx), id, async (trx) => {
          wasPublic = await publicApi.deviceRemoved(id, trx);
        });
        if (wasPublic) publicApi.dropCachedAnswers();
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
      handler: async (req) => {
        const id = param(req, 'device_id');
        const issued = await devices.rotateToken(userOf(req.ctx), id);
        return { status: 200, body: issuedView(issued, await published([id])) };
      },
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
