import type { Db } from '../storage/database.ts';
import { keysetPage, type PageRequest } from '../storage/keyset.ts';
import type { Tables } from '../storage/schema.ts';

/** A row of `alarm_events`: the rule engine writes them, this resource reads and acknowledges them. */
export type AlarmEventRow = Tables['alarm_events'];

export interface EventFilter {
  accountId: string;
  siteId?: string | undefined;
  channelId?: string | undefined;
  sensorId?: string | undefined;
  state?: 'open' | 'resolved' | undefined;
  kind?: AlarmEventRow['kind'] | undefined;
  /** `started_at >= from` */
  from?: number | undefined;
  /** `started_at < to` */
  to?: number | undefined;
  includeWithdrawn: boolean;
}

/** Reads and the acknowledgement of alarm events; the rule engine writes the rest. */
export class EventsRepository {
  async find(db: Db, accountId: string, id: string): Promise<AlarmEventRow | undefined> {
    return db
      .selectFrom('alarm_events')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
  }

  /** Newest first by `started_at`. */
  async list(db: Db, f: EventFilter, page: PageRequest): Promise<AlarmEventRow[]> {
    let q = db.selectFrom('alarm_events').selectAll().where('account_id', '=', f.accountId);
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

  /** Sets the acknowledgement once; false when it was already set. */
  async acknowledge(db: Db, id: string, by: string, note: string, at: number): Promise<boolean> {
    const result = await db
      .updateTable('alarm_events')
      .set({ acknowledged_at: at, acknowledged_by: by, ack_note: note, updated_at: at })
      .where('id', '=', id)
      .where('acknowledged_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }
}
