import type { Migration } from './migration.ts';

/**
 * Scheduled reports (docs/api/report-schedules.md). `report_schedules` holds what to make and for
 * whom, and the end of the next period to report (`next_period_end`) with the time its run is due
 * (`next_run_at`): a replica claims a run by moving both forward with a conditional UPDATE.
 * `report_schedule_runs` keeps one row per schedule and period: the report it made and when its
 * mails were queued, so each period is reported and mailed once.
 */
export const reportSchedules: Migration = {
  name: '0010_report_schedules',
  statements: () => [
    `CREATE TABLE report_schedules (
       id TEXT PRIMARY KEY,
       account_id TEXT NOT NULL REFERENCES accounts(id),
       site_id TEXT NOT NULL REFERENCES sites(id),
       template TEXT NOT NULL,
       language TEXT NOT NULL,
       every TEXT NOT NULL,
       recipients TEXT NOT NULL,
       created_by TEXT NOT NULL,
       created_at BIGINT NOT NULL,
       next_period_end BIGINT NOT NULL,
       next_run_at BIGINT NOT NULL)`,
    `CREATE INDEX report_schedules_account ON report_schedules (account_id, created_at)`,
    `CREATE INDEX report_schedules_due ON report_schedules (next_run_at)`,
    `CREATE TABLE report_schedule_runs (
       id TEXT PRIMARY KEY,
       schedule_id TEXT NOT NULL,
       account_id TEXT NOT NULL REFERENCES accounts(id),
       period_from BIGINT NOT NULL,
       period_to BIGINT NOT NULL,
       recipients TEXT NOT NULL,
       report_id TEXT,
       mailed_at BIGINT,
       error TEXT,
       created_at BIGINT NOT NULL,
       UNIQUE (schedule_id, period_to))`,
    `CREATE INDEX report_schedule_runs_pending ON report_schedule_runs (mailed_at)`,
  ],
};
