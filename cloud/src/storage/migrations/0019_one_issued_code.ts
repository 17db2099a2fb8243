import type { Migration } from './migration.ts';

/**
 * At most one `issued` sign-in code per e-mail, as a partial unique index: a new request
 * invalidates the earlier code in the transaction that issues the new one, and two requests at the
 * same moment (a double click) each missed the other's uncommitted code, leaving both usable. With
 * the index the second waits for the first and fails, and is run again (auth.service.ts). Codes
 * already issued twice keep only the newest.
 */
export const oneIssuedCode: Migration = {
  name: '0019_one_issued_code',
  statements: () => [
    `UPDATE login_codes SET state = 'invalidated'
     WHERE state = 'issued' AND EXISTS (
       SELECT 1 FROM login_codes newer
       WHERE newer.email = login_codes.email AND newer.state = 'issued'
         AND (newer.created_at > login_codes.created_at
              OR (newer.created_at = login_codes.created_at AND newer.id > login_codes.id)))`,
    `CREATE UNIQUE INDEX login_codes_one_issued ON login_codes (email) WHERE state = 'issued'`,
  ],
};
