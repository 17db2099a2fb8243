import type { Migration } from './migration.ts';

/**
 * `login_codes.browser_hash`: a hash of the secret of the `os_signin` cookie given to the browser
 * that asked for the code (docs/api/auth.md, "The link in another browser"). The mail's link signs
 * that browser in at once; any other browser is asked to confirm the address first. Null for codes
 * asked for before this migration, and for clients that keep no cookies.
 */
export const signInBrowser: Migration = {
  name: '0016_sign_in_browser',
  statements: () => [`ALTER TABLE login_codes ADD COLUMN browser_hash TEXT`],
};
