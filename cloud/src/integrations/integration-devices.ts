import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { AUTO_LOCAL_ID, autoCreateDevice, DeviceCache, devicePrincipal } from '../devices/auto-create.ts';
import type { DeviceRow, DevicesRepository } from '../devices/devices.repository.ts';
import { findModel } from '../devices/models.ts';
import { InvalidRequest, Unauthenticated } from '../errors.ts';
import type { DevicePrincipal } from '../http/context.ts';
import type { RateLimiter } from '../limits/rate-limiter.ts';
import type { Logger } from '../logger.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';
import type { IntegrationRow } from './integrations.repository.ts';

const LOWER_HEX_DEV_EUI = /^[0-9a-f]{16}$/;

/**
 * The devices an integration delivers for: found by `local_id` on the integration's site (a LoRaWAN
 * device's DevEUI in lower-case hex, a Shelly's own id), else created there with the model the
 * request names or the integration's default (docs/api/integrations.md). Cached for a short while:
 * a network server names the same devices all day. A device deleted meanwhile is noticed by the
 * ingest core, and the caller then calls `forget` and resolves again.
 */
export class IntegrationDevices {
  private readonly cache = new DeviceCache();

  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      devices: DevicesRepository;
      sites: SitesRepository;
      audit: AuditRepository;
      rateLimiter: RateLimiter;
      log: Logger;
    },
  ) {}

  async resolve(integration: IntegrationRow, localId: string, model: string): Promise<DevicePrincipal> {
    const key = `${integration.site_id}\u0000${localId}`;
    const hit = this.cache.get(key);
    if (hit && hit.accountId === integration.account_id) return hit;
    const found = await this.find(integration.site_id, localId);
    const device = devicePrincipal(found ?? (await this.create(integration, localId, model)));
    this.cache.set(key, device);
    return device;
  }

  /**
   * The device named `localId` on the site. Network servers send a DevEUI in lower-case hex, while an
   * operator who registers the device first often copies it from the label in upper case: that
   * spelling is the same device, not a reason to create a second one.
   */
  private async find(siteId: string, localId: string): Promise<DeviceRow | undefined> {
    const { db, devices } = this.deps;
    const exact = await devices.findByLocalId(db, siteId, localId);
    if (exact || !LOWER_HEX_DEV_EUI.test(localId)) return exact;
    return devices.findByLocalId(db, siteId, localId.toUpperCase());
  }

  forget(integration: IntegrationRow, localId: string): void {
    this.cache.delete(`${integration.site_id}\u0000${localId}`);
  }

  private async create(integration: IntegrationRow, localId: string, model: string): Promise<DeviceRow> {
    const { log } = this.deps;
    if (!AUTO_LOCAL_ID.test(localId)) {
      throw new InvalidRequest(
        'invalid_request',
        'the device id must be 1 to 128 printable ASCII characters without spaces',
        [{ path: 'device', message: 'invalid' }],
      );
    }
    if (!findModel(model)) {
      throw new InvalidRequest('invalid_request', `unknown model ${model}`, [
        { path: 'model', message: 'unknown' },
      ]);
    }
    const { row, created } = await autoCreateDevice(this.deps, {
      accountId: integration.account_id,
      siteId: integration.site_id,
      localId,
      model,
      by: integration.id,
      via: integration.kind,
      // The site may have been deleted since the token was last looked up: its token is dead.
      siteGone: () => new Unauthenticated('token_invalid', "the integration's site was deleted"),
    });
    if (!created) return row;
    log.info(
      { device_id: row.id, local_id: localId, site_id: row.site_id, integration_id: integration.id, model },
      'device created by an integration',
    );
    return row;
  }
}
