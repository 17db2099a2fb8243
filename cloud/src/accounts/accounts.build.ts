import { AccountsRepository } from './accounts.repository.ts';

/** The accounts' slice of the services. */
export function buildAccounts(): { accounts: AccountsRepository } {
  return { accounts: new AccountsRepository() };
}
