import { newId } from '../../../shared/ids.ts';
import { formatSeconds } from '../../../shared/time.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { Conflict, notFound, Unprocessable } from '../errors.ts';
import type { UserPrincipal } from '../http/context.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { Logger } from '../logger.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import { isUniqueViolation, type Db } from '../storage/database.ts';
import type { DeviceRow, DevicesRepository } from './devices.repository.ts';
import type { DeviceMovesRepository, MoveRow } from './moves.repository.ts';

export const APPLY_MOVES_JOB = 'device.apply_moves';

/**
 * Where a device was when: its moves, oldest first, and the site it had before the first.
 * Decisions, "Devices": a measurement with `ts < effective_at` belongs to the old site.
 */
export class Placement {
  constructor(
    private readonly initialSiteId: string,
    private readonly moves: readonly Pick<MoveRow, 'effective_at' | 'to_site_id'>[],
  ) {}

  /** The device's site at time `ts` (microseconds). */
  siteAt(ts: number): string {
    let site = this.initialSiteId;
    for (const m of this.moves) {
      if (m.effective_at > ts) break;
      site = m.to_site_id;
    }
    return site;
  }
}

/** Work that follows a device's moves (the alert rules of its sites), in the move's transaction. */
export interface MoveFollower {
  deviceMoved(db: Db, deviceId: string, effectiveAt: number): Promise<void>;
  /** After the move's commit. */
  committed(): void;
}

function localIdTaken(): Conflict {
  return new Conflict('local_id_taken', 'another device on the target site already has that local_id');
}

/**
 * `POST /v1/devices/{id}/move` (docs/api/resources.md). A move is a row in
 * `device_moves`; `devices.site_id` is the site at the current time, so a move whose `effective_at`
 * lies in the future is applied by a job at that time (and by any later `applyDue`).
 */
export class DeviceMovesService {
  private readonly followers: MoveFollower[] = [];

  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      log: Logger;
      jobs: JobQueue;
      devices: DevicesRepository;
      sites: SitesRepository;
      moves: DeviceMovesRepository;
      audit: AuditRepository;
    },
  ) {}

  /** Adds work to every recorded move (called while the services are built). */
  follow(follower: MoveFollower): void {
    this.followers.push(follower);
  }

  /** Registers the job that applies moves once their time has come. */
  register(): void {
    this.deps.jobs.register(APPLY_MOVES_JOB, { run: async () => void (await this.applyDue()) });
  }

  async move(
    by: UserPrincipal,
    deviceId: string,
    input: { to_site_id: string; effective_at: number },
  ): Promise<DeviceRow> {
    const { db, clock, jobs, devices, sites, moves, audit } = this.deps;
    const now = clock.nowMicros();
    try {
      const moved = await db.transaction().execute(async (trx) => {
        const device = await devices.find(trx, by.accountId, deviceId);
        if (!device) throw notFound('device');
        if (!(await sites.hold(trx, by.accountId, input.to_site_id))) throw notFound('site');
        const history = await moves.forDevices(trx, [deviceId]);
        const latest = history[history.length - 1];
        // The site after every recorded move (a pending one included) is where this move starts.
        const fromSite = latest?.to_site_id ?? device.site_id;
        if (latest && input.effective_at <= latest.effective_at) {
          throw new Unprocessable(
            'invalid_effective_at',
            `effective_at must be later than the device's previous move (${formatSeconds(latest.effective_at)})`,
            [{ path: 'effective_at', message: 'not after the previous move' }],
          );
        }
        if (fromSite === input.to_site_id) return device; // already there: nothing to record
        const clash = await devices.findByLocalId(trx, input.to_site_id, device.local_id);
        if (
          (clash && clash.id !== deviceId) ||
          (await moves.pendingArrival(trx, input.to_site_id, device.local_id, deviceId))
        )
          throw localIdTaken();
        const applyNow = input.effective_at <= now;
        await moves.insert(trx, {
          id: newId('mov'),
          account_id: by.accountId,
          device_id: deviceId,
          from_site_id: fromSite,
          to_site_id: input.to_site_id,
          effective_at: input.effective_at,
          applied_at: applyNow ? now : null,
          created_by: by.userId,
          created_at: now,
        });
        if (applyNow) await moves.setSite(trx, deviceId, input.to_site_id);
        else await jobs.enqueue(trx, APPLY_MOVES_JOB, { device_id: deviceId }, input.effective_at);
        for (const f of this.followers) await f.deviceMoved(trx, deviceId, input.effective_at);
        await audit.record(trx, {
          accountId: by.accountId,
          kind: 'device.moved',
          by: by.userId,
          target: deviceId,
          details: {
            from_site_id: fromSite,
            to_site_id: input.to_site_id,
            effective_at: formatSeconds(input.effective_at),
          },
          ts: now,
        });
        return applyNow ? { ...device, site_id: input.to_site_id } : device;
      });
      for (const f of this.followers) f.committed();
      return moved;
    } catch (err) {
      if (isUniqueViolation(err)) throw localIdTaken();
      throw err;
    }
  }

  /** Applies every pending move whose time has come, oldest first; answers how many it applied. */
  async applyDue(): Promise<number> {
    const { db, clock, log, moves } = this.deps;
    const now = clock.nowMicros();
    let applied = 0;
    for (const move of await moves.due(db, now)) {
      await db.transaction().execute(async (trx) => {
        // A deleted device stays where it was; the move still partitions its history.
        if (await moves.isLive(trx, move.device_id))
          await moves.setSite(trx, move.device_id, move.to_site_id);
        await moves.markApplied(trx, move.id, now);
      });
      applied++;
      log.info({ device_id: move.device_id, to_site_id: move.to_site_id }, 'device move applied');
    }
    return applied;
  }

  /** The placement history of devices, for partitioning their measurements by site. */
  async placements(db: Db, devices: Pick<DeviceRow, 'id' | 'site_id'>[]): Promise<Map<string, Placement>> {
    const rows = await this.deps.moves.forDevices(
      db,
      devices.map((d) => d.id),
    );
    const byDevice = new Map<string, MoveRow[]>();
    for (const r of rows) byDevice.set(r.device_id, [...(byDevice.get(r.device_id) ?? []), r]);
    return new Map(
      devices.map((d) => {
        const history = byDevice.get(d.id) ?? [];
        return [d.id, new Placement(history[0]?.from_site_id ?? d.site_id, history)];
      }),
    );
  }
}
