import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { Conflict, notFound } from '../errors.ts';
import type { UserPrincipal } from '../http/context.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';
import type { PageRequest } from '../storage/keyset.ts';
import type { WebhooksService } from '../webhooks/webhooks.service.ts';
import type { AnyEventRow, EventFilter, EventsRepository } from './events.repository.ts';
import { anyEventView } from './events.view.ts';

/** Alarm events as people read and acknowledge them (docs/api/rules.md). */
export class EventsService {
  private readonly ackListeners: ((event: AnyEventRow) => void)[] = [];

  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      events: EventsRepository;
      sites: SitesRepository;
      audit: AuditRepository;
      webhooks: WebhooksService;
    },
  ) {}

  /** Called after an acknowledgement commits, with the event as acknowledged (the live updates). */
  onAcknowledged(listener: (event: AnyEventRow) => void): void {
    this.ackListeners.push(listener);
  }

  async get(accountId: string, id: string): Promise<AnyEventRow> {
    const event = await this.deps.events.find(this.deps.db, accountId, id);
    if (!event) throw notFound('event');
    return event;
  }

  /** A filter naming a site, channel, sensor or rule of another account (or none) is 404, like the id itself. */
  async list(filter: EventFilter, page: PageRequest): Promise<AnyEventRow[]> {
    const { db, sites, events } = this.deps;
    if (filter.siteId !== undefined && !(await sites.find(db, filter.accountId, filter.siteId)))
      throw notFound('site');
    if (filter.channelId !== undefined) {
      const channel = await db
        .selectFrom('sensors')
        .select('id')
        .where('channel_id', '=', filter.channelId)
        .where('account_id', '=', filter.accountId)
        .executeTakeFirst();
      if (!channel) throw notFound('channel');
    }
    if (filter.sensorId !== undefined) {
      const sensor = await db
        .selectFrom('sensors')
        .select('id')
        .where('id', '=', filter.sensorId)
        .where('account_id', '=', filter.accountId)
        .executeTakeFirst();
      if (!sensor) throw notFound('sensor');
    }
    if (filter.ruleId !== undefined) {
      // A deleted rule of the account still names its events; another account's or none is 404.
      const rule = await db
        .selectFrom('alert_rules')
        .select('id')
        .where('id', '=', filter.ruleId)
        .where('account_id', '=', filter.accountId)
        .executeTakeFirst();
      if (!rule) throw notFound('alert_rule');
    }
    return events.list(db, filter, page);
  }

  /**
   * Records who reacted, once: a second acknowledgement is 409 `already_acknowledged` (the first
   * note stays). Audit-logged; webhooks subscribed to `alarm.acknowledged` are told.
   */
  async acknowledge(by: UserPrincipal, id: string, note: string): Promise<AnyEventRow> {
    const { db, clock, events, audit, webhooks } = this.deps;
    const now = clock.nowMicros();
    const event = await db.transaction().execute(async (trx) => {
      const found = await events.find(trx, by.accountId, id);
      if (!found) throw notFound('event');
      if (!(await events.acknowledge(trx, id, by.userId, note, now))) {
        throw new Conflict('already_acknowledged', `event ${id} was already acknowledged`);
      }
      // Read again after the update, which waited for any change the engine was committing (an
      // end, a withdrawal): the answer and the webhook show the event as it is, not as first read.
      const acknowledged = (await events.find(trx, by.accountId, id)) ?? found;
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'event.acknowledged',
        by: by.userId,
        target: id,
        details: { sensor_id: found.sensor_id, channel_id: found.channel_id, kind: found.kind, note },
        ts: now,
      });
      await webhooks.publish(trx, by.accountId, 'alarm.acknowledged', anyEventView(acknowledged), now);
      return acknowledged;
    });
    webhooks.kick();
    for (const listener of this.ackListeners) listener(event);
    return event;
  }
}
