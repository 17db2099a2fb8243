import type { Db } from '../storage/database.ts';
import type { Tables } from '../storage/schema.ts';

export type ReportRecipientRow = Tables['report_recipients'];
export type RecipientState = ReportRecipientRow['state'];

/** The rows of `report_recipients` (migration 0017): one per account and lower-cased address. */
export class ReportRecipientsRepository {
  /**
   * Inserts the row unless the account has the address already (another schedule made at the same
   * moment named it): then the row it has is answered, as the one to use.
   */
  async insertOrFind(
    db: Db,
    row: ReportRecipientRow,
  ): Promise<{ row: ReportRecipientRow; inserted: boolean }> {
    const result = await db
      .insertInto('report_recipients')
      .values(row)
      .onConflict((oc) => oc.columns(['account_id', 'address']).doNothing())
      .executeTakeFirst();
    if (Number(result.numInsertedOrUpdatedRows ?? 0) === 1) return { row, inserted: true };
    const existing = await this.find(db, row.account_id, row.address);
    if (!existing) throw new Error(`report recipient ${row.address} neither inserted nor found`);
    return { row: existing, inserted: false };
  }

  async find(db: Db, accountId: string, address: string): Promise<ReportRecipientRow | undefined> {
    return db
      .selectFrom('report_recipients')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('address', '=', address)
      .executeTakeFirst();
  }

  async findByToken(db: Db, token: string): Promise<ReportRecipientRow | undefined> {
    return db.selectFrom('report_recipients').selectAll().where('token', '=', token).executeTakeFirst();
  }

  /** The rows of these addresses (lower-cased) in the account. */
  async ofAddresses(db: Db, accountId: string, addresses: string[]): Promise<ReportRecipientRow[]> {
    if (addresses.length === 0) return [];
    return db
      .selectFrom('report_recipients')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('address', 'in', addresses)
      .execute();
  }

  /**
   * The asks by mail since `since` of one account (`{accountId}`) or of one address by every
   * account (`{address}`): how many, and when the first of them was.
   */
  async askedSince(
    db: Db,
    of: { accountId: string } | { address: string },
    since: number,
  ): Promise<{ count: number; first: number | null }> {
    const row = await db
      .selectFrom('report_recipients')
      .select((eb) => [eb.fn.countAll<number>().as('n'), eb.fn.min<number>('asked_at').as('first')])
      .$if('accountId' in of, (q) => q.where('account_id', '=', (of as { accountId: string }).accountId))
      .$if('address' in of, (q) => q.where('address', '=', (of as { address: string }).address))
      .where('asked_by', 'is not', null)
      .where('asked_at', '>=', since)
      .executeTakeFirstOrThrow();
    return { count: Number(row.n), first: row.first === null ? null : Number(row.first) };
  }

  async markAsked(db: Db, id: string, by: string, at: number): Promise<void> {
    await db
      .updateTable('report_recipients')
      .set({ asked_by: by, asked_at: at })
      .where('id', '=', id)
      .execute();
  }

  async answer(db: Db, id: string, state: RecipientState, at: number): Promise<void> {
    await db.updateTable('report_recipients').set({ state, answered_at: at }).where('id', '=', id).execute();
  }
}
