import { sql } from 'kysely';
import type { Db } from '../storage/database.ts';

/** The job queue's figures per kind, for `GET /metrics`: one grouped scan of the jobs table. */
export async function jobFigures(db: Db): Promise<{ kind: string; queued: number; failed: number }[]> {
  const rows = await db
    .selectFrom('jobs')
    .select([
      'kind',
      sql<number>`SUM(CASE WHEN done_at IS NULL AND failed_at IS NULL THEN 1 ELSE 0 END)`.as('queued'),
      sql<number>`SUM(CASE WHEN failed_at IS NOT NULL THEN 1 ELSE 0 END)`.as('failed'),
    ])
    .groupBy('kind')
    .execute();
  return rows.map((r) => ({ kind: r.kind, queued: Number(r.queued), failed: Number(r.failed) }));
}
