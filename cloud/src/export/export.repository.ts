import type { Db } from '../storage/database.ts';
import type { Tables } from '../storage/schema.ts';

/** The columns of `alarm_events` the export writes, in events.csv's order. */
const EXPORT_EVENT_COLUMNS = [
  'id',
  'kind',
  'sensor_id',
  'channel_id',
  'device_id',
  'site_id',
  'started_at',
  'alarm_at',
  'ended_at',
  'ok_min',
  'ok_max',
  'peak_value',
  'silenced',
  'acknowledged_at',
  'acknowledged_by',
  'ack_note',
] as const;

/** An alarm event as the export writes it. */
export type ExportEventRow = Pick<Tables['alarm_events'], (typeof EXPORT_EVENT_COLUMNS)[number]>;

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
   * are not part of the record.
   */
  async eventsPage(
    db: Db,
    accountId: string,
    after: readonly [number, string] | null,
    limit: number,
  ): Promise<ExportEventRow[]> {
    let q = db
      .selectFrom('alarm_events')
      .select(EXPORT_EVENT_COLUMNS)
      .where('account_id', '=', accountId)
      .where('withdrawn_at', 'is', null);
    if (after) {
      const [startedAt, id] = after;
      q = q.where((eb) =>
        eb.or([
          eb('started_at', '>', startedAt),
          eb.and([eb('started_at', '=', startedAt), eb('id', '>', id)]),
        ]),
      );
    }
    return q.orderBy('started_at').orderBy('id').limit(limit).execute();
  }
}
