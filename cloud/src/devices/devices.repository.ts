import { sql } from 'kysely';
import type { Db } from '../storage/database.ts';
import { keysetPage, type PageRequest } from '../storage/keyset.ts';
import type { Tables } from '../storage/schema.ts';

export type DeviceRow = Tables['devices'];

export interface DeviceFilter {
  accountId: string;
  siteId?: string | undefined;
  online?: boolean | undefined;
  /** substring, case-insensitive */
  model?: string | undefined;
}

export class DevicesRepository {
  async insert(db: Db, row: DeviceRow): Promise<void> {
    await db.insertInto('devices').values(row).execute();
  }

  /** A live (not deleted) device of the account. */
  async find(db: Db, accountId: string, id: string): Promise<DeviceRow | undefined> {
    return db
      .selectFrom('devices')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
  }

  async findByLocalId(db: Db, siteId: string, localId: string): Promise<DeviceRow | undefined> {
    return db
      .selectFrom('devices')
      .selectAll()
      .where('site_id', '=', siteId)
      .where('local_id', '=', localId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
  }

  async list(db: Db, filter: DeviceFilter, page: PageRequest): Promise<DeviceRow[]> {
    let q = db
      .selectFrom('devices')
      .selectAll()
      .where('account_id', '=', filter.accountId)
      .where('deleted_at', 'is', null);
    if (filter.siteId !== undefined) q = q.where('site_id', '=', filter.siteId);
    if (filter.online !== undefined) q = q.where('online', '=', filter.online ? 1 : 0);
    if (filter.model !== undefined) {
      const pattern = `%${filter.model.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
      q = q.where(sql<boolean>`lower(model) LIKE ${pattern} ESCAPE '\\'`);
    }
    return keysetPage(q, 'created_at', 'id', 'asc', page).execute();
  }

  async update(
    db: Db,
    id: string,
    patch: Partial<
      Pick<DeviceRow, 'name' | 'local_id' | 'notes' | 'token_hash' | 'token_issued_at' | 'fw_version'>
    >,
  ): Promise<void> {
    if (Object.keys(patch).length === 0) return;
    await db.updateTable('devices').set(patch).where('id', '=', id).execute();
  }

  /** Soft delete: the token stops working at once, the channels' data stays for retention. */
  async softDelete(db: Db, id: string, now: number): Promise<void> {
    await db
      .updateTable('devices')
      .set({ deleted_at: now, token_hash: null, online: 0 })
      .where('id', '=', id)
      .execute();
  }
}
