import type { Db } from '../storage/database.ts';
import { keysetPage, type PageRequest } from '../storage/keyset.ts';
import type { Tables } from '../storage/schema.ts';

export type IntegrationRow = Tables['integrations'];
export type IntegrationKind = IntegrationRow['kind'];

/** The SQL of inbound integrations, their remembered uplinks and their devices' last events. */
export class IntegrationsRepository {
  async insert(db: Db, row: IntegrationRow): Promise<void> {
    await db.insertInto('integrations').values(row).execute();
  }

  /** A live (not deleted) integration of the account. */
  async find(db: Db, accountId: string, id: string): Promise<IntegrationRow | undefined> {
    return db
      .selectFrom('integrations')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
  }

  async list(db: Db, accountId: string, page: PageRequest): Promise<IntegrationRow[]> {
    const q = db
      .selectFrom('integrations')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('deleted_at', 'is', null);
    return keysetPage(q, 'created_at', 'id', 'asc', page).execute();
  }

  /** The live integration a `whk_` token belongs to, while its site exists. */
  async findByTokenHash(db: Db, tokenHash: string): Promise<IntegrationRow | undefined> {
    return db
      .selectFrom('integrations')
      .innerJoin('sites', 'sites.id', 'integrations.site_id')
      .selectAll('integrations')
      .where('integrations.token_hash', '=', tokenHash)
      .where('integrations.deleted_at', 'is', null)
      .where('sites.deleted_at', 'is', null)
      .executeTakeFirst();
  }

  async softDelete(db: Db, id: string, now: number): Promise<void> {
    await db.updateTable('integrations').set({ deleted_at: now }).where('id', '=', id).execute();
  }

  async setToken(db: Db, id: string, tokenHash: string, now: number): Promise<void> {
    await db
      .updateTable('integrations')
      .set({ token_hash: tokenHash, token_issued_at: now })
      .where('id', '=', id)
      .execute();
  }

  async touch(db: Db, id: string, now: number): Promise<void> {
    await db.updateTable('integrations').set({ last_used_at: now }).where('id', '=', id).execute();
  }

  /**
   * Remembers an uplink under `ts` unless it is known already; answers the time it is stored under
   * (the first delivery's), so that a redelivery writes the same (device, ts, channel) rows.
   */
  async rememberUplink(
    db: Db,
    integrationId: string,
    uplinkKey: string,
    ts: number,
    now: number,
  ): Promise<number> {
    await db
      .insertInto('integration_uplinks')
      .values({ integration_id: integrationId, uplink_key: uplinkKey, ts, created_at: now })
      .onConflict((oc) => oc.columns(['integration_id', 'uplink_key']).doNothing())
      .execute();
    const row = await db
      .selectFrom('integration_uplinks')
      .select('ts')
      .where('integration_id', '=', integrationId)
      .where('uplink_key', '=', uplinkKey)
      .executeTakeFirstOrThrow();
    return Number(row.ts);
  }

  /** Forgets uplinks remembered before `before` (a network server redelivers within seconds, if ever). */
  async forgetUplinks(db: Db, before: number): Promise<void> {
    await db.deleteFrom('integration_uplinks').where('created_at', '<', before).execute();
  }

  /** Keeps the last event of its kind for the device. */
  async recordEvent(db: Db, row: Tables['integration_device_events']): Promise<void> {
    await db
      .insertInto('integration_device_events')
      .values(row)
      .onConflict((oc) =>
        oc.columns(['integration_id', 'dev_eui', 'event']).doUpdateSet({ at: row.at, detail: row.detail }),
      )
      .execute();
  }

  async lastEvents(
    db: Db,
    integrationId: string,
    devEui: string,
  ): Promise<Tables['integration_device_events'][]> {
    return db
      .selectFrom('integration_device_events')
      .selectAll()
      .where('integration_id', '=', integrationId)
      .where('dev_eui', '=', devEui)
      .orderBy('event')
      .execute();
  }
}
