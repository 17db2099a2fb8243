import { newId } from '../../../shared/ids.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { RateLimited, type ApiError } from '../errors.ts';
import type { DevicePrincipal } from '../http/context.ts';
import type { RateLimiter } from '../limits/rate-limiter.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import { isUniqueViolation, type Db } from '../storage/database.ts';
import type { DeviceRow, DevicesRepository } from './devices.repository.ts';

/** A `local_id` a sender may name a device by when the device is created for it. */
export const AUTO_LOCAL_ID = /^[\x21-\x7e]{1,128}$/;

/** How long a resolved device is trusted without asking the database again. */
const CACHE_MS = 30_000;
const CACHE_LIMIT = 100_000;

/** The principal ingest runs as for a device. */
export function devicePrincipal(d: DeviceRow): DevicePrincipal {
  return {
    kind: 'device',
    accountId: d.account_id,
    deviceId: d.id,
    siteId: d.site_id,
    localId: d.local_id,
    model: d.model,
  };
}

/**
 * Resolved devices by a key of the caller's, each trusted for a short while: a sender names the same
 * devices all day. The map is emptied when it reaches its limit rather than evicting one by one.
 */
export class DeviceCache {
  private readonly entries = new Map<string, { device: DevicePrincipal; until: number }>();

  get(key: string): DevicePrincipal | undefined {
    const hit = this.entries.get(key);
    return hit && hit.until > performance.now() ? hit.device : undefined;
  }

  set(key: string, device: DevicePrincipal): void {
    if (this.entries.size >= CACHE_LIMIT) this.entries.clear();
    this.entries.set(key, { device, until: performance.now() + CACHE_MS });
  }

  delete(key: string): void {
    this.entries.delete(key);
  }
}

/** A new device's row: named after its local id unless a name is given, never seen yet. */
export function newDeviceRow(input: {
  accountId: string;
  siteId: string;
  localId: string;
  name?: string | undefined;
  notes?: string | undefined;
  model: string;
  tokenHash: string | null;
  now: number;
}): DeviceRow {
  return {
    id: newId('dev'),
    account_id: input.accountId,
    site_id: input.siteId,
    local_id: input.localId,
    name: input.name ?? input.localId,
    notes: input.notes ?? '',
    model: input.model,
    fw_version: null,
    token_hash: input.tokenHash,
    token_issued_at: input.now,
    last_seen_at: null,
    online: 0,
    created_at: input.now,
    deleted_at: null,
  };
}

/**
 * Inserts a device with its `device.created` audit entry, in the caller's transaction. `via` names the
 * channel an auto-created device was first heard on; a device created through the API has none.
 */
export async function insertDevice(
  trx: Db,
  deps: { devices: DevicesRepository; audit: AuditRepository },
  row: DeviceRow,
  by: string,
  via?: string,
): Promise<void> {
  await deps.devices.insert(trx, row);
  await deps.audit.record(trx, {
    accountId: row.account_id,
    kind: 'device.created',
    by,
    target: row.id,
    details: { site_id: row.site_id, local_id: row.local_id, model: row.model, ...(via ? { via } : {}) },
    ts: row.created_at,
  });
}

export interface AutoCreateDeps {
  db: Db;
  clock: Clock;
  devices: DevicesRepository;
  sites: Pick<SitesRepository, 'hold'>;
  audit: AuditRepository;
  rateLimiter: Pick<RateLimiter, 'hit'>;
}

/**
 * New devices one integration or bridge may create in a clock hour (a fixed window). A leaked `whk_` token or bridge
 * certificate could otherwise fill a site with a device per request (each new device has a fresh
 * ingest budget). A whole site's sensors joining at once fit; the rest wait for the next hour.
 */
export const AUTO_CREATE_PER_HOUR = 1000;

export interface AutoCreateInput {
  accountId: string;
  siteId: string;
  localId: string;
  model: string;
  /** Who creates it, for the audit entry (an integration's or a bridge's id). */
  by: string;
  /** The channel the device was first heard on, for the audit entry (`mqtt`, `chirpstack`, ...). */
  via: string;
  /** The refusal when the site was deleted since the sender was authenticated. */
  siteGone: () => ApiError;
}

/**
 * Creates a device on a site for the first message that names it by `local_id`, with the audit entry
 * as the transaction's last write. When another delivery (or process) created the same device first,
 * that one is returned with `created: false`.
 */
export async function autoCreateDevice(
  deps: AutoCreateDeps,
  input: AutoCreateInput,
): Promise<{ row: DeviceRow; created: boolean }> {
  const { db, clock, devices, rateLimiter } = deps;
  const budget = await rateLimiter.hit(`device-create:${input.by}`, AUTO_CREATE_PER_HOUR, 3600);
  if (!budget.allowed)
    throw new RateLimited(
      budget.retryAfterSeconds,
      `at most ${AUTO_CREATE_PER_HOUR} new devices an hour are created for one ${input.via === 'mqtt' ? 'bridge' : 'integration'}; register them through the API, or try again later`,
    );
  const now = clock.nowMicros();
  const row = newDeviceRow({ ...input, tokenHash: null, now });
  try {
    await db.transaction().execute(async (trx) => {
      // Held, not only read: a concurrent site delete then sees this device and refuses.
      if (!(await deps.sites.hold(trx, input.accountId, input.siteId))) throw input.siteGone();
      await insertDevice(trx, deps, row, input.by, input.via);
    });
  } catch (err) {
    if (!isUniqueViolation(err)) throw err;
    const existing = await devices.findByLocalId(db, input.siteId, input.localId);
    if (!existing) throw err;
    return { row: existing, created: false };
  }
  return { row, created: true };
}
