import type { PageRequest } from '../storage/keyset.ts';
import type { Db } from '../storage/database.ts';
import { keysetPage } from '../storage/keyset.ts';
import type { Tables } from '../storage/schema.ts';

export type ReportRow = Tables['reports'];

/** The rows of `reports` and the PDF bytes of `report_files` (migration 0008). */
export class ReportsRepository {
  async insert(db: Db, row: ReportRow): Promise<void> {
    await db.insertInto('reports').values(row).execute();
  }

  async find(db: Db, accountId: string, id: string): Promise<ReportRow | undefined> {
    return db
      .selectFrom('reports')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
  }

  /** By id alone: the job that renders a report knows only the id it was queued with. */
  async findById(db: Db, id: string): Promise<ReportRow | undefined> {
    return db.selectFrom('reports').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Newest first, optionally of one site. */
  async list(db: Db, accountId: string, siteId: string | undefined, page: PageRequest): Promise<ReportRow[]> {
    let q = db.selectFrom('reports').selectAll().where('account_id', '=', accountId);
    if (siteId !== undefined) q = q.where('site_id', '=', siteId);
    return keysetPage(q, 'created_at', 'id', 'desc', page).execute();
  }

  async setRunning(db: Db, id: string): Promise<void> {
    await db.updateTable('reports').set({ state: 'running', error: null }).where('id', '=', id).execute();
  }

  /** Stores the file and marks the report ready, in the caller's transaction. */
  async setReady(
    db: Db,
    id: string,
    file: { content: Uint8Array; sha256: string },
    readyAt: number,
  ): Promise<void> {
    await db.deleteFrom('report_files').where('report_id', '=', id).execute();
    await db.insertInto('report_files').values({ report_id: id, content: file.content }).execute();
    await db
      .updateTable('reports')
      .set({
        state: 'ready',
        error: null,
        ready_at: readyAt,
        size_bytes: file.content.byteLength,
        sha256: file.sha256,
      })
      .where('id', '=', id)
      .execute();
  }

  /** Back to queued after a failed attempt that will be retried; `error` says what went wrong. */
  async setQueued(db: Db, id: string, error: string): Promise<void> {
    await db.updateTable('reports').set({ state: 'queued', error }).where('id', '=', id).execute();
  }

  async setFailed(db: Db, id: string, error: string): Promise<void> {
    await db.updateTable('reports').set({ state: 'failed', error }).where('id', '=', id).execute();
  }

  async file(db: Db, id: string): Promise<Buffer | undefined> {
    const row = await db
      .selectFrom('report_files')
      .select('content')
      .where('report_id', '=', id)
      .executeTakeFirst();
    return row ? Buffer.from(row.content.buffer, row.content.byteOffset, row.content.byteLength) : undefined;
  }
}
