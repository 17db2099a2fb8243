import type { ExpressionBuilder, UpdateObject } from 'kysely';
import type { Db } from '../storage/database.ts';
import { keysetPage, type PageRequest } from '../storage/keyset.ts';
import type { Tables } from '../storage/schema.ts';

export type SiteRow = Tables['sites'];

/** What an update of a site sets: values, or values made from the row's own columns. */
type SiteUpdate =
  UpdateObject<Tables, 'sites'> | ((eb: ExpressionBuilder<Tables, 'sites'>) => UpdateObject<Tables, 'sites'>);

/** An update that changes nothing: it takes the row's lock (PostgreSQL) for the transaction. */
const UNCHANGED = (eb: ExpressionBuilder<Tables, 'sites'>) => ({ deleted_at: eb.ref('deleted_at') });

export class SitesRepository {
  async insert(db: Db, row: SiteRow): Promise<void> {
    await db.insertInto('sites').values(row).execute();
  }

  async find(db: Db, accountId: string, id: string): Promise<SiteRow | undefined> {
    return db
      .selectFrom('sites')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
  }

  /**
   * `find` for a transaction that puts something on the site (a device, a move into it, an
   * integration, a bridge, a report schedule, an alert rule): the row is also locked until the
   * transaction ends, so a concurrent delete, which locks it first, either waits and then sees what
   * was put there, or has committed and this answers undefined.
   */
  async hold(db: Db, accountId: string, id: string): Promise<SiteRow | undefined> {
    return db
      .updateTable('sites')
      .set(UNCHANGED)
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('deleted_at', 'is', null)
      .returningAll()
      .executeTakeFirst();
  }

  async list(db: Db, accountId: string, page: PageRequest): Promise<SiteRow[]> {
    const q = db
      .selectFrom('sites')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('deleted_at', 'is', null);
    return keysetPage(q, 'created_at', 'id', 'asc', page).execute();
  }

  /** Changes a live site; false when it was deleted (meanwhile). An empty patch holds the row. */
  async update(db: Db, id: string, patch: Partial<Pick<SiteRow, 'name' | 'timezone'>>): Promise<boolean> {
    return this.setLive(db, id, Object.keys(patch).length === 0 ? UNCHANGED : patch);
  }

  async countLiveDevices(db: Db, siteId: string): Promise<number> {
    const row = await db
      .selectFrom('devices')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('site_id', '=', siteId)
      .where('deleted_at', 'is', null)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /**
   * The earliest pending move of a live device into the site (its `effective_at`), if any: a site
   * with one is not empty, or the device would arrive in a deleted site.
   */
  async firstPendingArrival(db: Db, siteId: string): Promise<number | undefined> {
    const row = await db
      .selectFrom('device_moves as m')
      .innerJoin('devices as d', 'd.id', 'm.device_id')
      .select((eb) => eb.fn.min<number>('m.effective_at').as('at'))
      .where('m.to_site_id', '=', siteId)
      .where('m.applied_at', 'is', null)
      .where('d.deleted_at', 'is', null)
      .executeTakeFirst();
    return row?.at === null || row?.at === undefined ? undefined : Number(row.at);
  }

  /**
   * Soft delete: measurements of its former devices stay readable until retention removes them. Call
   * it before checking that the site is empty, in the same transaction: the row lock it takes makes
   * a `hold` in flight finish first. False when the site was already deleted.
   */
  async delete(db: Db, id: string, now: number): Promise<boolean> {
    return this.setLive(db, id, { deleted_at: now });
  }

  /** Updates the site unless it is deleted; false when it is. */
  private async setLive(db: Db, id: string, set: SiteUpdate): Promise<boolean> {
    const result = await db
      .updateTable('sites')
      .set(set)
      .where('id', '=', id)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }
}
