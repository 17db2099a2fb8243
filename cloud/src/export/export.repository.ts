import { sql } from 'kysely';
import type { Db } from '../storage/database.ts';
import type { Tables } from '../storage/schema.ts';

/** The columns both event tables share that the export writes, in events.csv's order. */
const EXPORT_EVENT_COLUMNS = [
  'id',
  'sensor_id',
  'channel_id',
  'device_id',
  'site_id',
  'started_at',
  'alarm_at',
  'ended_at',
  'peak_value',
  'silenced',
  'acknowledged_at',
  'acknowledged_by',
  'ack_note',
] as const;

/**
 * An alarm event as the export writes it: of the sensor's simple rule (its bounds at the time, no
 * alert rule) or of an alert rule (its id and the severity of the condition that fired, no bounds).
 */
export type ExportEventRow = Pick<Tables['alarm_events'], (typeof EXPORT_EVENT_COLUMNS)[number]> & {
  kind: Tables['alert_events']['kind'];
  ok_min: number | null;
  ok_max: number | null;
  rule_id: string | null;
  severity: Tables['alert_events']['severity'] | null;
};

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
   * Alarm events of the account, of the sensors' own rules and of the alert rules, oldest first;
   * events the engine withdrew (replaced on recompute) are not part of the record.
   */
  async eventsPage(
    db: Db,
    accountId: string,
    after: readonly [number, string] | null,
    limit: number,
  ): Promise<ExportEventRow[]> {
    const simple = db
      .selectFrom('alarm_events')
      .select(EXPORT_EVENT_COLUMNS)
      // A union pairs its columns by position: both branches list the same names in the same order.
      .select((eb) => [
        eb.ref('kind').$castTo<ExportEventRow['kind']>().as('kind'),
        eb.ref('ok_min').$castTo<number | null>().as('ok_min'),
        eb.ref('ok_max').$castTo<number | null>().as('ok_max'),
        sql<string | null>`cast(null as text)`.as('rule_id'),
        sql<ExportEventRow['severity']>`cast(null as text)`.as('severity'),
      ])
      .where('account_id', '=', accountId)
      .where('withdrawn_at', 'is', null);
    const alerts = db
      .selectFrom('alert_events')
      .select(EXPORT_EVENT_COLUMNS)
      .select([
        'kind',
        sql<number | null>`cast(null as double precision)`.as('ok_min'),
        sql<number | null>`cast(null as double precision)`.as('ok_max'),
        'rule_id',
        'severity',
      ])
      .where('account_id', '=', accountId)
      .where('withdrawn_at', 'is', null);
    let q = db.selectFrom(simple.unionAll(alerts).as('e')).selectAll();
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
