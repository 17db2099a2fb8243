import type { Db } from '../storage/database.ts';
import type { Tables } from '../storage/schema.ts';

export type AccountRow = Tables['accounts'];
export type UserRow = Tables['users'];

export class AccountsRepository {
  async createAccountWithUser(db: Db, account: AccountRow, user: UserRow): Promise<void> {
    await db.insertInto('accounts').values(account).execute();
    await db.insertInto('users').values(user).execute();
  }

  async findUserByEmail(db: Db, email: string): Promise<UserRow | undefined> {
    return db.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirst();
  }

  async findUser(db: Db, userId: string): Promise<UserRow | undefined> {
    return db.selectFrom('users').selectAll().where('id', '=', userId).executeTakeFirst();
  }

  async findAccount(db: Db, accountId: string): Promise<AccountRow | undefined> {
    return db.selectFrom('accounts').selectAll().where('id', '=', accountId).executeTakeFirst();
  }

  async listUsers(db: Db, accountId: string): Promise<UserRow[]> {
    return db
      .selectFrom('users')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('created_at')
      .execute();
  }
}
