import { sql } from 'kysely';
import type { Db } from '../storage/database.ts';
import type { Tables } from '../storage/schema.ts';

/** An alarm event as the export writes it (table `alarm_events`, migration 0002 of the rule engine). */
export interface ExportEventRow {
  id: string;
  kind: string;
  sensor_id: string;
  channel_id: string;
  device_id: string;
  site_id: string;
  started_at: number;
  alarm_at: number;
  ended_at: number | null;
  ok_min: number;
  ok_max: number;
  peak_value: number | null;
  silenced: number;
  acknowledged_at: number | null;
  acknowledged_by: string | null;
  ack_note: string | null;
}

/**
 * The account export's reads, each a keyset page (sort key, id) so the export walks any amount of
 * data in bounded chunks.
 */
export class ExportRepository {
  /** Every device of the account, deleted ones included (their data is still kept). */
  async devices(db: Db, accountId: string): Promise<Pick<Tables['devices'], 'id' | 'site_id'>[]> {
    return db.selectFrom('devices').select(['id', 'site_id']).where('account_id', '=', accountId).execute();
  }

  async auditPage(
    db: Db,
    accountId: string,
    after: readonly [number, string] | null,
    limit: number,
  ): Promise<Tables['audit_log'][]> {
    let q = db.selectFrom('audit_log').selectAll().where('account_id', '=', accountId);
    if (after) {
      const [ts, id] = after;
      q = q.where((eb) => eb.or([eb('ts', '>', ts), eb.and([eb('ts', '=', ts), eb('id', '>', id)])]));
    }
    return q.orderBy('ts').orderBy('id').limit(limit).execute();
  }

  /**
   * Alarm events of the account, oldest first; events the engine withdrew (replaced on recompute)
   * are not part of the record. Plain SQL: the table belongs to the rule engine's migration.
   */
  async eventsPage(
    db: Db,
    accountId: string,
    after: readonly [number, string] | null,
    limit: number,
  ): Promise<ExportEventRow[]> {
    const afterClause = after
      ? sql`AND (started_at > ${after[0]} OR (started_at = ${after[0]} AND id > ${after[1]}))`
      : sql``;
    const result = await sql<ExportEventRow>`
      SELECT id, kind, sensor_id, channel_id, device_id, site_id, started_at, alarm_at, ended_at, ok_min, ok_max,
        peak_value, silenced, acknowledged_at, acknowledged_by, ack_note
      FROM alarm_events
      WHERE account_id = ${accountId} AND withdrawn_at IS NULL ${afterClause}
      ORDER BY started_at, id
      LIMIT ${limit}`.execute(db);
    return result.rows;
  }
}
