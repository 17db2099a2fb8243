import type { Db } from '../storage/database.ts';
import type { Tables } from '../storage/schema.ts';

export type MoveRow = Tables['device_moves'];

/** The `device_moves` table, and the `devices.site_id` a move sets once it is applied. */
export class DeviceMovesRepository {
  async insert(db: Db, row: MoveRow): Promise<void> {
    await db.insertInto('device_moves').values(row).execute();
  }

  /** Every move of the devices, oldest first. */
  async forDevices(db: Db, deviceIds: string[]): Promise<MoveRow[]> {
    if (deviceIds.length === 0) return [];
    return db
      .selectFrom('device_moves')
      .selectAll()
      .where('device_id', 'in', deviceIds)
      .orderBy('device_id')
      .orderBy('effective_at')
      .execute();
  }

  /** Pending moves into `siteId` of devices whose local_id is `localId` (they would clash on arrival). */
  async pendingArrival(db: Db, siteId: string, localId: string, exceptDeviceId: string): Promise<boolean> {
    const row = await db
      .selectFrom('device_moves as m')
      .innerJoin('devices as d', 'd.id', 'm.device_id')
      .select('m.id')
      .where('m.to_site_id', '=', siteId)
      .where('m.applied_at', 'is', null)
      .where('d.local_id', '=', localId)
      .where('d.deleted_at', 'is', null)
      .where('d.id', '!=', exceptDeviceId)
      .executeTakeFirst();
    return row !== undefined;
  }

  async due(db: Db, now: number): Promise<MoveRow[]> {
    return db
      .selectFrom('device_moves')
      .selectAll()
      .where('applied_at', 'is', null)
      .where('effective_at', '<=', now)
      .orderBy('effective_at')
      .execute();
  }

  async markApplied(db: Db, id: string, now: number): Promise<void> {
    await db.updateTable('device_moves').set({ applied_at: now }).where('id', '=', id).execute();
  }

  /** Whether the device exists and is not deleted. */
  async isLive(db: Db, deviceId: string): Promise<boolean> {
    const device = await db
      .selectFrom('devices')
      .select(['id', 'deleted_at'])
      .where('id', '=', deviceId)
      .executeTakeFirst();
    return device !== undefined && device.deleted_at === null;
  }

  async setSite(db: Db, deviceId: string, siteId: string): Promise<void> {
    await db.updateTable('devices').set({ site_id: siteId }).where('id', '=', deviceId).execute();
  }
}
