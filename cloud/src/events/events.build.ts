import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';
import type { WebhooksService } from '../webhooks/webhooks.service.ts';
import { EventsRepository } from './events.repository.ts';
import { EventsService } from './events.service.ts';

/** Alarm events as people see and acknowledge them: their slice of the services. */
export function buildEvents(deps: {
  db: Db;
  clock: Clock;
  sites: SitesRepository;
  audit: AuditRepository;
  webhooks: WebhooksService;
}): { events: EventsService } {
  const { db, clock, sites, audit, webhooks } = deps;
  return { events: new EventsService({ db, clock, events: new EventsRepository(), sites, audit, webhooks }) };
}
