import type { Migration } from './migration.ts';

/**
 * `report_recipients`: whether an address agreed to receive an account's scheduled reports
 * (docs/api/report-schedules.md, "Recipients confirm"). One row per account and address
 * (lower-cased): `pending` until the address answers the mail that asks it, then `confirmed` or
 * `declined`. `token` (`rcp_…`) is in the links of every mail to the address: the page it opens
 * confirms or stops. The addresses of schedules made before this migration are recorded as
 * `confirmed`, so an upgrade stops no report; their next report carries the link that stops it.
 */
export const reportRecipients: Migration = {
  name: '0017_report_recipients',
  statements: ({ dialect }) => [
    `CREATE TABLE report_recipients (
       id TEXT PRIMARY KEY,
       account_id TEXT NOT NULL REFERENCES accounts(id),
       address TEXT NOT NULL,
       state TEXT NOT NULL,
       token TEXT NOT NULL UNIQUE,
       asked_by TEXT,
       asked_at BIGINT NOT NULL,
       answered_at BIGINT,
       UNIQUE (account_id, address))`,
    // The asks of one address by every account (at most a few a day).
    `CREATE INDEX report_recipients_address ON report_recipients (address, asked_at)`,
    dialect === 'sqlite'
      ? `INSERT INTO report_recipients (id, account_id, address, state, token, asked_by, asked_at, answered_at)
         SELECT 'rcn_' || lower(hex(randomblob(16))), account_id, address, 'confirmed',
                'rcp_' || lower(hex(randomblob(32))), NULL, MIN(created_at), MIN(created_at)
         FROM (SELECT s.account_id, lower(j.value) AS address, s.created_at
               FROM report_schedules s, json_each(s.recipients) j)
         GROUP BY account_id, address`
      : `INSERT INTO report_recipients (id, account_id, address, state, token, asked_by, asked_at, answered_at)
         SELECT 'rcn_' || replace(gen_random_uuid()::text, '-', ''), account_id, address, 'confirmed',
                'rcp_' || replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''),
                NULL, MIN(created_at), MIN(created_at)
         FROM (SELECT s.account_id, lower(j.value) AS address, s.created_at
               FROM report_schedules s CROSS JOIN LATERAL json_array_elements_text(s.recipients::json) AS j(value)) x
         GROUP BY account_id, address`,
  ],
};
