import { newSecret } from '../../../shared/ids.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import { DEVICE_TOKEN_PREFIX } from '../auth/authenticator.ts';
import { hashSecret } from '../auth/secrets.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { Conflict, notFound } from '../errors.ts';
import type { UserPrincipal } from '../http/context.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import { isUniqueViolation, type Db } from '../storage/database.ts';
import type { DeviceRow, DevicesRepository } from './devices.repository.ts';
import { modelOf, requireModel } from './models.ts';
import { insertDevice, newDeviceRow } from './auto-create.ts';

export interface IssuedToken {
  device: DeviceRow;
  /** Plaintext `ds_live_…`, returned once. */
  token: string;
  ingestUrl: string;
}

function localIdTaken(): Conflict {
  return new Conflict('local_id_taken', 'another device on this site already has that local_id');
}

/** Devices and their ingest tokens (docs/api/resources.md). */
export class DevicesService {
  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      config: Config;
      devices: DevicesRepository;
      sites: SitesRepository;
      audit: AuditRepository;
    },
  ) {}

  /**
   * For Shelly GET models the complete URL to paste into the device, token included (which is why
   * rotation changes it); otherwise the ingest endpoint.
   */
  ingestUrl(device: Pick<DeviceRow, 'model' | 'local_id'>, token: string): string {
    const base = this.deps.config.baseUrl;
    if (modelOf(device.model).ingest_url_kind !== 'shelly_get') return `${base}/v1/ingest`;
    const q = `token=${encodeURIComponent(token)}&device=${encodeURIComponent(device.local_id)}`;
    return `${base}/v1/ingest/shelly?${q}&temp=$temperature&hum=$humidity&battery=$bat&signal=$rssi`;
  }

  async create(
    by: UserPrincipal,
    input: { site_id: string; local_id: string; name: string; model: string; notes?: string | undefined },
  ): Promise<IssuedToken> {
    const { db, clock, devices, sites } = this.deps;
    const token = newSecret(DEVICE_TOKEN_PREFIX);
    const now = clock.nowMicros();
    const row = newDeviceRow({
      accountId: by.accountId,
      siteId: input.site_id,
      localId: input.local_id,
      name: input.name,
      notes: input.notes,
      model: input.model,
      tokenHash: hashSecret(token),
      now,
    });
    try {
      await db.transaction().execute(async (trx) => {
        if (!(await sites.hold(trx, by.accountId, input.site_id))) throw notFound('site');
        requireModel(input.model);
        if (await devices.findByLocalId(trx, input.site_id, input.local_id)) throw localIdTaken();
        await insertDevice(trx, this.deps, row, by.userId);
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw localIdTaken();
      throw err;
    }
    return { device: row, token, ingestUrl: this.ingestUrl(row, token) };
  }

  async get(accountId: string, id: string): Promise<DeviceRow> {
    const device = await this.deps.devices.find(this.deps.db, accountId, id);
    if (!device) throw notFound('device');
    return device;
  }

  async update(
    by: UserPrincipal,
    id: string,
    patch: { name?: string | undefined; local_id?: string | undefined; notes?: string | undefined },
  ): Promise<DeviceRow> {
    const { db, clock, devices, audit } = this.deps;
    try {
      return await db.transaction().execute(async (trx) => {
        const device = await devices.find(trx, by.accountId, id);
        if (!device) throw notFound('device');
        const changes = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
        if (patch.local_id !== undefined && patch.local_id !== device.local_id) {
          if (await devices.findByLocalId(trx, device.site_id, patch.local_id)) throw localIdTaken();
        }
        await devices.update(trx, id, changes);
        await audit.record(trx, {
          accountId: by.accountId,
          kind: 'device.updated',
          by: by.userId,
          target: id,
          details: {
            before: Object.fromEntries(Object.keys(changes).map((k) => [k, device[k as keyof DeviceRow]])),
            after: changes,
          },
          ts: clock.nowMicros(),
        });
        return { ...device, ...changes };
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw localIdTaken();
      throw err;
    }
  }

  /**
   * Deletes the device and revokes its token; its measurements stay until retention.
   * `alsoInTransaction` runs in the same transaction (the public API's epoch), so what depends on
   * the device being there changes with it or not at all.
   */
  async delete(by: UserPrincipal, id: string, alsoInTransaction?: (trx: Db) => Promise<void>): Promise<void> {
    const { db, clock, devices, audit } = this.deps;
    await db.transaction().execute(async (trx) => {
      const device = await devices.find(trx, by.accountId, id);
      if (!device) throw notFound('device');
      const now = clock.nowMicros();
      await devices.softDelete(trx, id, now);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'device.deleted',
        by: by.userId,
        target: id,
        details: { site_id: device.site_id, local_id: device.local_id },
        ts: now,
      });
      await alsoInTransaction?.(trx);
    });
  }

  /** A new token, once; the old one is refused from the next request on. */
  async rotateToken(by: UserPrincipal, id: string): Promise<IssuedToken> {
    const { db, clock, devices, audit } = this.deps;
    const token = newSecret(DEVICE_TOKEN_PREFIX);
    const now = clock.nowMicros();
    const device = await db.transaction().execute(async (trx) => {
      const found = await devices.find(trx, by.accountId, id);
      if (!found) throw notFound('device');
      await devices.update(trx, id, { token_hash: hashSecret(token), token_issued_at: now });
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'device.token_rotated',
        by: by.userId,
        target: id,
        ts: now,
      });
      return { ...found, token_issued_at: now };
    });
    return { device, token, ingestUrl: this.ingestUrl(device, token) };
  }
}
