import type { Selectable } from 'kysely';
import type { Db } from '../storage/database.ts';
import { keysetPage, type PageRequest } from '../storage/keyset.ts';
import type { Tables } from '../storage/schema.ts';

export type WebhookRow = Tables['webhooks'];
export type DeliveryRow = Tables['webhook_deliveries'];
export type AttemptRow = Selectable<Tables['webhook_attempts']>;

export class WebhooksRepository {
  async insert(db: Db, row: WebhookRow): Promise<void> {
    await db.insertInto('webhooks').values(row).execute();
  }

  async find(db: Db, accountId: string, id: string): Promise<WebhookRow | undefined> {
    return db
      .selectFrom('webhooks')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
  }

  async list(db: Db, accountId: string, page: PageRequest): Promise<WebhookRow[]> {
    const q = db
      .selectFrom('webhooks')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('deleted_at', 'is', null);
    return keysetPage(q, 'created_at', 'id', 'asc', page).execute();
  }

  /** The account's live webhooks (the caller filters by event type). */
  async live(db: Db, accountId: string): Promise<WebhookRow[]> {
    return db
      .selectFrom('webhooks')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('deleted_at', 'is', null)
      .execute();
  }

  async softDelete(db: Db, id: string, at: number): Promise<void> {
    await db.updateTable('webhooks').set({ deleted_at: at }).where('id', '=', id).execute();
    await db
      .updateTable('webhook_deliveries')
      .set({ state: 'cancelled', next_attempt_at: null })
      .where('webhook_id', '=', id)
      .where('state', '=', 'pending')
      .execute();
  }

  async insertDelivery(db: Db, row: DeliveryRow): Promise<void> {
    await db.insertInto('webhook_deliveries').values(row).execute();
  }

  async delivery(db: Db, id: string): Promise<DeliveryRow | undefined> {
    return db.selectFrom('webhook_deliveries').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async webhookById(db: Db, id: string): Promise<WebhookRow | undefined> {
    return db.selectFrom('webhooks').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async recordAttempt(
    db: Db,
    attempt: Omit<AttemptRow, 'id'>,
    delivery: Partial<Pick<DeliveryRow, 'state' | 'delivered_at' | 'next_attempt_at'>>,
  ): Promise<void> {
    await db.insertInto('webhook_attempts').values(attempt).execute();
    await db
      .updateTable('webhook_deliveries')
      .set({
        ...delivery,
        attempts: attempt.attempt,
        last_attempt_at: attempt.at,
        last_status: attempt.status,
        last_error: attempt.error,
      })
      .where('id', '=', attempt.delivery_id)
      .execute();
  }

  /**
   * Removes deliveries queued before `before` that are finished (delivered, failed or cancelled),
   * with their attempts, in batches of `batch`; answers how many. Pending ones are never removed.
   */
  async pruneFinished(db: Db, before: number, batch = 1_000): Promise<number> {
    let removed = 0;
    for (;;) {
      const ids = (
        await db
          .selectFrom('webhook_deliveries')
          .select('id')
          .where('created_at', '<', before)
          .where('state', '<>', 'pending')
          .limit(batch)
          .execute()
      ).map((r) => r.id);
      if (ids.length === 0) return removed;
      await db.transaction().execute(async (trx) => {
        await trx.deleteFrom('webhook_attempts').where('delivery_id', 'in', ids).execute();
        await trx.deleteFrom('webhook_deliveries').where('id', 'in', ids).execute();
      });
      removed += ids.length;
      if (ids.length < batch) return removed;
    }
  }

  /** Newest first. */
  async deliveries(db: Db, webhookId: string, page: PageRequest): Promise<DeliveryRow[]> {
    const q = db.selectFrom('webhook_deliveries').selectAll().where('webhook_id', '=', webhookId);
    return keysetPage(q, 'created_at', 'id', 'desc', page).execute();
  }

  async attempts(db: Db, deliveryIds: readonly string[]): Promise<AttemptRow[]> {
    if (deliveryIds.length === 0) return [];
    return db
      .selectFrom('webhook_attempts')
      .selectAll()
      .where('delivery_id', 'in', [...deliveryIds])
      .orderBy('delivery_id')
      .orderBy('attempt')
      .execute();
  }
}
