import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { AUTO_LOCAL_ID, autoCreateDevice, DeviceCache, devicePrincipal } from '../devices/auto-create.ts';
import type { DeviceRow, DevicesRepository } from '../devices/devices.repository.ts';
import { findModel } from '../devices/models.ts';
import { Forbidden, InvalidRequest } from '../errors.ts';
import type { DevicePrincipal } from '../http/context.ts';
import type { RateLimiter } from '../limits/rate-limiter.ts';
import type { Logger } from '../logger.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';

/** The bridge a connection authenticated as (its certificate's row). */
export interface BridgeIdentity {
  bridgeId: string;
  accountId: string;
  siteId: string;
}

/** The model of a device an MQTT bridge creates when nothing better is known. */
export const AUTO_CREATED_MODEL = 'mqtt-generic';

function cacheKey(bridge: BridgeIdentity, segment: string): string {
  return `${bridge.accountId}\u0000${bridge.siteId}\u0000${segment}`;
}

/**
 * Which device a topic names (docs/api/mqtt.md): a `dev_` id of the account, else a
 * `local_id` on the bridge's site, else a new device on that site (`mqtt-generic`, or the model of its
 * `info` message). Also the device metadata an `info` message carries.
 */
export class BridgeDevices {
  private readonly cache = new DeviceCache();

  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      devices: DevicesRepository;
      sites: Pick<SitesRepository, 'hold'>;
      audit: AuditRepository;
      rateLimiter: RateLimiter;
      log: Logger;
    },
  ) {}

  /**
   * Cached for a short while: a gateway names the same devices in every message. A device deleted
   * meanwhile is noticed by the ingest core (the caller then calls `forget` and resolves again).
   */
  async resolve(bridge: BridgeIdentity, segment: string, modelHint?: string): Promise<DevicePrincipal> {
    const key = cacheKey(bridge, segment);
    const hit = this.cache.get(key);
    if (hit) return hit;
    const device = await this.lookup(bridge, segment, modelHint);
    this.cache.set(key, device);
    return device;
  }

  forget(bridge: BridgeIdentity, segment: string): void {
    this.cache.delete(cacheKey(bridge, segment));
  }

  private async lookup(
    bridge: BridgeIdentity,
    segment: string,
    modelHint?: string,
  ): Promise<DevicePrincipal> {
    const { db, devices } = this.deps;
    if (segment.startsWith('dev_')) {
      const byId = await devices.find(db, bridge.accountId, segment);
      if (byId) return devicePrincipal(byId);
    }
    const byLocalId = await devices.findByLocalId(db, bridge.siteId, segment);
    if (byLocalId) return devicePrincipal(byLocalId);
    if (!AUTO_LOCAL_ID.test(segment)) {
      throw new InvalidRequest(
        'invalid_topic',
        'the device level of the topic must be a dev_ id or a local_id of 1 to 128 printable ASCII characters without spaces',
      );
    }
    return devicePrincipal(await this.create(bridge, segment, modelHint));
  }

  private async create(bridge: BridgeIdentity, localId: string, modelHint?: string): Promise<DeviceRow> {
    const { log } = this.deps;
    const model = modelHint && findModel(modelHint) ? modelHint : AUTO_CREATED_MODEL;
    const { row, created } = await autoCreateDevice(this.deps, {
      accountId: bridge.accountId,
      siteId: bridge.siteId,
      localId,
      model,
      by: bridge.bridgeId,
      via: 'mqtt',
      siteGone: () => new Forbidden('forbidden', "the bridge's site was deleted"),
    });
    if (!created) return row;
    log.info(
      { device_id: row.id, local_id: localId, site_id: row.site_id, bridge_id: bridge.bridgeId },
      'device created by an MQTT bridge',
    );
    return row;
  }

  /** `info`: the firmware version (the model is immutable once the device exists). */
  async recordInfo(
    device: DevicePrincipal,
    info: { fw_version?: string | undefined; model?: string | undefined },
  ): Promise<void> {
    if (info.model !== undefined && info.model !== device.model) {
      this.deps.log.info(
        { device_id: device.deviceId, model: device.model, info_model: info.model },
        'info names another model than the device has; models are immutable, kept',
      );
    }
    if (info.fw_version !== undefined) {
      await this.deps.devices.update(this.deps.db, device.deviceId, { fw_version: info.fw_version });
    }
  }
}
