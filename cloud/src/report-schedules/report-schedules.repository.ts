import type { PageRequest } from '../storage/keyset.ts';
import type { Db } from '../storage/database.ts';
import { keysetPage } from '../storage/keyset.ts';
import type { Tables } from '../storage/schema.ts';

export type ReportScheduleRow = Tables['report_schedules'];
export type ScheduleRunRow = Tables['report_schedule_runs'];

/** The rows of `report_schedules` and `report_schedule_runs` (migration 0010). */
export class ReportSchedulesRepository {
  async insert(db: Db, row: ReportScheduleRow): Promise<void> {
    await db.insertInto('report_schedules').values(row).execute();
  }

  async find(db: Db, accountId: string, id: string): Promise<ReportScheduleRow | undefined> {
    return db
      .selectFrom('report_schedules')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
  }

  async findById(db: Db, id: string): Promise<ReportScheduleRow | undefined> {
    return db.selectFrom('report_schedules').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Oldest first, like every list of resources. */
  async list(db: Db, accountId: string, page: PageRequest): Promise<ReportScheduleRow[]> {
    const q = db.selectFrom('report_schedules').selectAll().where('account_id', '=', accountId);
    return keysetPage(q, 'created_at', 'id', 'asc', page).execute();
  }

  /** Every schedule of the account (a recipient's page lists those naming it). */
  async allOf(db: Db, accountId: string): Promise<ReportScheduleRow[]> {
    return db
      .selectFrom('report_schedules')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('created_at')
      .execute();
  }

  async delete(db: Db, id: string): Promise<void> {
    await db.deleteFrom('report_schedules').where('id', '=', id).execute();
  }

  /** Schedules whose next run is due at `now`, the longest overdue first. */
  async due(db: Db, now: number, limit: number): Promise<ReportScheduleRow[]> {
    return db
      .selectFrom('report_schedules')
      .selectAll()
      .where('next_run_at', '<=', now)
      .orderBy('next_run_at')
      .limit(limit)
      .execute();
  }

  /**
   * Claims the run of the period ending at `periodEnd` by moving the schedule on to the next one;
   * true for the one caller whose UPDATE found the schedule still at `periodEnd`.
   */
  async claimRun(
    db: Db,
    id: string,
    periodEnd: number,
    next: { periodEnd: number; runAt: number },
  ): Promise<boolean> {
    const result = await db
      .updateTable('report_schedules')
      .set({ next_period_end: next.periodEnd, next_run_at: next.runAt })
      .where('id', '=', id)
      .where('next_period_end', '=', periodEnd)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /**
   * The end of the schedule's latest run: where the period of its next run begins. Undefined before
   * its first run.
   */
  async lastPeriodEnd(db: Db, scheduleId: string): Promise<number | undefined> {
    const row = await db
      .selectFrom('report_schedule_runs')
      .select('period_to')
      .where('schedule_id', '=', scheduleId)
      .orderBy('period_to', 'desc')
      .limit(1)
      .executeTakeFirst();
    return row?.period_to;
  }

  /**
   * The time zone of the account's site, also of a deleted one (a deleted site's row keeps it):
   * the periods of its schedules stay those of that zone. Undefined for no such site.
   */
  async siteTimezone(db: Db, accountId: string, siteId: string): Promise<string | undefined> {
    const row = await db
      .selectFrom('sites')
      .select('timezone')
      .where('id', '=', siteId)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    return row?.timezone;
  }

  async insertRun(db: Db, run: ScheduleRunRow): Promise<void> {
    await db.insertInto('report_schedule_runs').values(run).execute();
  }

  async findRun(db: Db, id: string): Promise<ScheduleRunRow | undefined> {
    return db.selectFrom('report_schedule_runs').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async setRunReport(db: Db, id: string, reportId: string): Promise<void> {
    await db.updateTable('report_schedule_runs').set({ report_id: reportId }).where('id', '=', id).execute();
  }

  async setRunError(db: Db, id: string, error: string): Promise<void> {
    await db.updateTable('report_schedule_runs').set({ error }).where('id', '=', id).execute();
  }

  /** The report an earlier attempt of this run made, if it got that far (reports name their schedule). */
  async reportOfRun(db: Db, run: ScheduleRunRow): Promise<string | undefined> {
    const row = await db
      .selectFrom('reports')
      .select('id')
      .where('account_id', '=', run.account_id)
      .where('created_by', '=', run.schedule_id)
      .where('period_from', '=', run.period_from)
      .where('period_to', '=', run.period_to)
      .executeTakeFirst();
    return row?.id;
  }

  /** Runs whose report is finished (ready or failed) and whose mails are not queued yet. */
  async toMail(db: Db, limit: number): Promise<ScheduleRunRow[]> {
    return db
      .selectFrom('report_schedule_runs as r')
      .innerJoin('reports as p', 'p.id', 'r.report_id')
      .selectAll('r')
      .where('r.mailed_at', 'is', null)
      .where('r.error', 'is', null)
      .where('p.state', 'in', ['ready', 'failed'])
      .orderBy('r.created_at')
      .limit(limit)
      .execute();
  }

  /** Claims the mailing of a run; true for the one caller that found it not yet mailed. */
  async claimMailing(db: Db, id: string, now: number): Promise<boolean> {
    const result = await db
      .updateTable('report_schedule_runs')
      .set({ mailed_at: now })
      .where('id', '=', id)
      .where('mailed_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }
}
