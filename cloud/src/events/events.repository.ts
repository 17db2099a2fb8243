import type { Db } from '../storage/database.ts';
import { keysetPage, type PageRequest } from '../storage/keyset.ts';
import type { Tables } from '../storage/schema.ts';

/** A row of `alarm_events`: the rule engine writes them, this resource reads and acknowledges them. */
export type AlarmEventRow = Tables['alarm_events'];
/** An event of either the simple rule (`alarm_events`) or an alert rule (`alert_events`). */
export type AnyEventRow = AlarmEventRow | Tables['alert_events'];

export interface EventFilter {
  accountId: string;
  siteId?: string | undefined;
  channelId?: string | undefined;
  sensorId?: string | undefined;
  state?: 'open' | 'resolved' | undefined;
  kind?: Tables['alert_events']['kind'] | undefined;
  /** Only events of this alert rule. */
  ruleId?: string | undefined;
  /** `started_at >= from` */
  from?: number | undefined;
  /** `started_at < to` */
  to?: number | undefined;
  includeWithdrawn: boolean;
}

/** Reads and the acknowledgement of alarm events; the rule engine writes the rest. */
export class EventsRepository {
  async find(db: Db, accountId: string, id: string): Promise<AnyEventRow | undefined> {
    return (
      (await db
        .selectFrom('alarm_events')
        .selectAll()
        .where('id', '=', id)
        .where('account_id', '=', accountId)
        .executeTakeFirst()) ??
      (await db
        .selectFrom('alert_events')
        .selectAll()
        .where('id', '=', id)
        .where('account_id', '=', accountId)
        .executeTakeFirst())
    );
  }

  /**
   * Newest first by `started_at`, the events of both tables merged: each table's page is read with
   * the same cursor, and the first `limit + 1` of the two together are the page.
   */
  async list(db: Db, f: EventFilter, page: PageRequest): Promise<AnyEventRow[]> {
    const simple =
      f.ruleId !== undefined || f.kind === 'rate_of_change' ? [] : await this.listSimple(db, f, page);
    const alert = await this.listAlert(db, f, page);
    return [...simple, ...alert]
      .sort((a, b) => b.started_at - a.started_at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
      .slice(0, page.limit + 1);
  }

  private async listAlert(db: Db, f: EventFilter, page: PageRequest): Promise<Tables['alert_events'][]> {
    let q = db.selectFrom('alert_events').selectAll().where('account_id', '=', f.accountId);
    if (f.ruleId !== undefined) q = q.where('rule_id', '=', f.ruleId);
    if (f.siteId !== undefined) q = q.where('site_id', '=', f.siteId);
    if (f.channelId !== undefined) q = q.where('channel_id', '=', f.channelId);
    if (f.sensorId !== undefined) q = q.where('sensor_id', '=', f.sensorId);
    if (f.kind !== undefined) q = q.where('kind', '=', f.kind);
    if (f.from !== undefined) q = q.where('started_at', '>=', f.from);
    if (f.to !== undefined) q = q.where('started_at', '<', f.to);
    if (!f.includeWithdrawn || f.state === 'open') q = q.where('withdrawn_at', 'is', null);
    if (f.state === 'open') q = q.where('ended_at', 'is', null);
    if (f.state === 'resolved')
      q = q.where((eb) => eb.or([eb('ended_at', 'is not', null), eb('withdrawn_at', 'is not', null)]));
    return keysetPage(q, 'started_at', 'id', 'desc', page).execute();
  }

  private async listSimple(db: Db, f: EventFilter, page: PageRequest): Promise<AlarmEventRow[]> {
    let q = db.selectFrom('alarm_events').selectAll().where('account_id', '=', f.accountId);
    if (f.siteId !== undefined) q = q.where('site_id', '=', f.siteId);
    if (f.channelId !== undefined) q = q.where('channel_id', '=', f.channelId);
    if (f.sensorId !== undefined) q = q.where('sensor_id', '=', f.sensorId);
    if (f.kind !== undefined) q = q.where('kind', '=', f.kind as AlarmEventRow['kind']);
    if (f.from !== undefined) q = q.where('started_at', '>=', f.from);
    if (f.to !== undefined) q = q.where('started_at', '<', f.to);
    if (!f.includeWithdrawn || f.state === 'open') q = q.where('withdrawn_at', 'is', null);
    if (f.state === 'open') q = q.where('ended_at', 'is', null);
    if (f.state === 'resolved')
      q = q.where((eb) => eb.or([eb('ended_at', 'is not', null), eb('withdrawn_at', 'is not', null)]));
    return keysetPage(q, 'started_at', 'id', 'desc', page).execute();
  }

  /** Sets the acknowledgement once; false when it was already set. */
  async acknowledge(db: Db, id: string, by: string, note: string, at: number): Promise<boolean> {
    const set = { acknowledged_at: at, acknowledged_by: by, ack_note: note, updated_at: at };
    for (const table of ['alarm_events', 'alert_events'] as const) {
      const result = await db
        .updateTable(table)
        .set(set)
        .where('id', '=', id)
        .where('acknowledged_at', 'is', null)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 1) return true;
    }
    return false;
  }
}
