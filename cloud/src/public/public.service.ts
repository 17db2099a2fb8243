import { createHmac } from 'node:crypto';
import { z } from 'zod';
import { newId } from '../../../shared/ids.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { InvalidRequest, notFound, type ErrorDetail } from '../errors.ts';
import type { UserPrincipal } from '../http/context.ts';
import type { Db } from '../storage/database.ts';
import type { FlagWithPin, PublicDeviceRow, PublicFlagRow, PublicRepository } from './public.repository.ts';

/** 1 to `max` characters (code points, so an emoji counts once). */
function text(max: number) {
  return z
    .string()
    .refine((s) => s.length > 0 && [...s].length <= max, `must be 1 to ${max} characters`)
    .refine((s) => ![...s].some(isControl), 'must not contain control characters');
}

/** C0 and C1 control characters: shown to anyone on the map, and printed in an operator's terminal. */
export function isControl(c: string): boolean {
  const n = c.codePointAt(0)!;
  return n < 0x20 || (n >= 0x7f && n <= 0x9f);
}

/**
 * `public` of `PATCH /v1/devices/{id}`: any of the fields; they are merged with what the device has.
 * A device can be enabled only with all of nickname, location_name, lat and lon set.
 */
export const PublicSettingsPatch = z.strictObject({
  enabled: z.boolean().optional(),
  nickname: text(64).optional(),
  location_name: text(64).optional(),
  lat: z.number().min(-90).max(90).optional(),
  lon: z.number().min(-180).max(180).optional(),
  organisation: text(64).nullable().optional(),
});
export type PublicSettingsPatch = z.output<typeof PublicSettingsPatch>;

export const REASON_MAX = 500;

/** What an owner publishes about a device, and the flags anyone may raise about a public sensor. */
export class PublicService {
  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      publicRepository: PublicRepository;
      audit: AuditRepository;
      /** Told after each committed change of what is public (this process's caches drop at once). */
      onChange: () => void;
    },
  ) {}

  private reporterKeyRead: Promise<string> | null = null;

  async settingsOf(deviceIds: readonly string[]): Promise<Map<string, PublicDeviceRow>> {
    const rows = await this.deps.publicRepository.settingsOf(this.deps.db, deviceIds);
    return new Map(rows.map((r) => [r.device_id, r]));
  }

  /**
   * The device's settings with `patch` merged in, or 400 `invalid_request` naming the fields an
   * enabled device lacks. Reads only: the route checks this before it changes anything.
   */
  async merged(accountId: string, deviceId: string, patch: PublicSettingsPatch): Promise<PublicDeviceRow> {
    const found = await this.deps.publicRepository.settings(this.deps.db, deviceId);
    const row: PublicDeviceRow = {
      device_id: deviceId,
      account_id: accountId,
      enabled: patch.enabled === undefined ? (found?.enabled ?? 0) : patch.enabled ? 1 : 0,
      nickname: patch.nickname ?? found?.nickname ?? null,
      location_name: patch.location_name ?? found?.location_name ?? null,
      organisation: patch.organisation === undefined ? (found?.organisation ?? null) : patch.organisation,
      lat: patch.lat ?? found?.lat ?? null,
      lon: patch.lon ?? found?.lon ?? null,
      updated_at: this.deps.clock.nowMicros(),
    };
    if (row.enabled === 1) {
      const missing: ErrorDetail[] = (['nickname', 'location_name', 'lat', 'lon'] as const)
        .filter((k) => row[k] === null)
        .map((k) => ({ path: `public.${k}`, message: 'required to make the device public' }));
      if (missing.length > 0) {
        throw new InvalidRequest(
          'invalid_request',
          `invalid body: a public device needs ${missing.map((m) => m.path).join(', ')}`,
          missing,
        );
      }
    }
    return row;
  }

  /** Stores the settings, grows the public epoch and records the change (the audit entry last). */
  async save(by: UserPrincipal, row: PublicDeviceRow): Promise<PublicDeviceRow> {
    const { db, publicRepository, audit } = this.deps;
    await db.transaction().execute(async (trx) => {
      const before = await publicRepository.settings(trx, row.device_id);
      await publicRepository.saveSettings(trx, row);
      await publicRepository.bumpEpoch(trx);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'device.public_changed',
        by: by.userId,
        target: row.device_id,
        details: { before: before ? settingsDetails(before) : null, after: settingsDetails(row) },
        ts: row.updated_at,
      });
    });
    this.deps.onChange();
    return row;
  }

  /**
   * A device is being deleted (in `trx`): if it was public, the epoch grows with the delete, so every
   * replica's cached answers that may show it are stale from its commit on. Answers whether it was
   * public: then the caller calls `dropCachedAnswers` after the commit.
   */
  async deviceRemoved(deviceId: string, trx: Db): Promise<boolean> {
    const settings = await this.deps.publicRepository.settings(trx, deviceId);
    if (settings?.enabled !== 1) return false;
    await this.deps.publicRepository.bumpEpoch(trx);
    return true;
  }

  /** Forgets this process's cached public answers (after a committed change of what is public). */
  dropCachedAnswers(): void {
    this.deps.onChange();
  }

  /** Stores a flag about a public sensor for an operator (`npm run admin -- flags`). */
  async flag(sensorId: string, reason: string, clientAddress: string): Promise<PublicFlagRow> {
    const row: PublicFlagRow = {
      id: newId('flg'),
      sensor_id: sensorId,
      reason,
      reporter: reporterHash(await this.reporterKey(), clientAddress),
      created_at: this.deps.clock.nowMicros(),
      resolved_at: null,
      resolution: null,
    };
    await this.deps.publicRepository.insertFlag(this.deps.db, row);
    return row;
  }

  /** The installation's key of reporter hashes (migration 0018): read once per process, again after a failed read. */
  private reporterKey(): Promise<string> {
    this.reporterKeyRead ??= this.deps.publicRepository
      .installationSecret(this.deps.db, 'flag_reporter')
      .catch((err: unknown) => {
        this.reporterKeyRead = null;
        throw err;
      });
    return this.reporterKeyRead;
  }

  /** Open flags, oldest first (`all`: resolved ones too). */
  async flags(options: { all: boolean }): Promise<FlagWithPin[]> {
    return this.deps.publicRepository.flags(this.deps.db, options);
  }

  /** Takes a sensor off the public API and resolves its open flags as `hidden`. */
  async hide(sensorId: string): Promise<{ resolved: number }> {
    const { db, clock, publicRepository } = this.deps;
    const now = clock.nowMicros();
    const resolved = await db.transaction().execute(async (trx) => {
      if (!(await publicRepository.sensorExists(trx, sensorId))) throw notFound('sensor');
      await publicRepository.hide(trx, sensorId, now);
      await publicRepository.bumpEpoch(trx);
      return publicRepository.resolveFlags(trx, { sensorId }, 'hidden', now);
    });
    this.deps.onChange();
    return { resolved };
  }

  /** Puts a hidden sensor back (it shows again while its device is public). */
  async unhide(sensorId: string): Promise<boolean> {
    const { db, publicRepository } = this.deps;
    const removed = await db.transaction().execute(async (trx) => {
      const n = await publicRepository.unhide(trx, sensorId);
      if (n > 0) await publicRepository.bumpEpoch(trx);
      return n;
    });
    this.deps.onChange();
    return removed > 0;
  }

  /** Resolves one open flag as `dismissed`; false when there is no open flag by that id. */
  async dismiss(flagId: string): Promise<boolean> {
    const { db, clock, publicRepository } = this.deps;
    return (await publicRepository.resolveFlags(db, { id: flagId }, 'dismissed', clock.nowMicros())) > 0;
  }
}

function settingsDetails(row: PublicDeviceRow) {
  return {
    enabled: row.enabled === 1,
    nickname: row.nickname,
    location_name: row.location_name,
    organisation: row.organisation,
    lat: row.lat,
    lon: row.lon,
  };
}

/**
 * The reporter as flags keep it: a hash of the address keyed with the installation's secret, so an
 * operator sees one address reporting many times without the address being stored, and no one
 * without the key can find it by hashing every address.
 */
function reporterHash(key: string, address: string): string {
  return createHmac('sha256', key).update(address).digest('hex').slice(0, 16);
}
