import type { Db } from '../storage/database.ts';
import type { Tables } from '../storage/schema.ts';

export type ReportRecipientRow = Tables['report_recipients'];
export type RecipientState = ReportRecipientRow['state'];

/** The rows of `report_recipients` (migration 0017): one per account and lower-cased address. */
export class ReportRecipientsRepository {
  async insert(db: Db, row: ReportRecipientRow): Promise<void> {
    await db.insertInto('report_recipients').values(row).execute();
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

  /** How many addresses the account had asked by mail since `since`. */
  async askedSince(db: Db, accountId: string, since: number): Promise<number> {
    const row = await db
      .selectFrom('report_recipients')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('account_id', '=', accountId)
      .where('asked_by', 'is not', null)
      .where('asked_at', '>=', since)
      .executeTakeFirstOrThrow();
    return Number(row.n);
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
