import type { AccountsRepository } from '../accounts/accounts.repository.ts';
import type { Config } from '../config.ts';
import { eventView } from '../events/events.view.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { Mail } from '../mail/mailer.ts';
import type { AlarmNotifier, AlarmTransition } from '../rules/rule-engine.ts';
import type { Db } from '../storage/database.ts';
import type { WebhooksService } from '../webhooks/webhooks.service.ts';
import { alarmMail, type AlarmContext } from './alarm-mail.ts';

/**
 * Tells people about alarms (docs/api/rules.md): an e-mail to every
 * user of the account and `alarm.opened` / `alarm.resolved` to the webhooks subscribed. Everything is
 * queued in the rule engine's transaction (mail jobs, webhook deliveries), so an alarm that was
 * recorded is announced even if the process dies right after. A withdrawn alarm that had been
 * announced is closed with `alarm.resolved` (its `withdrawn_at` is set) and a "Withdrawn" mail.
 */
export class AlarmMailAndWebhooks implements AlarmNotifier {
  constructor(
    private readonly deps: {
      config: Config;
      jobs: JobQueue;
      accounts: AccountsRepository;
      webhooks: WebhooksService;
    },
  ) {}

  async notify(db: Db, transitions: AlarmTransition[], now: number): Promise<void> {
    const { config, jobs, accounts, webhooks } = this.deps;
    for (const t of transitions) {
      const e = t.event;
      const context = await this.context(db, e.sensor_id, e.device_id, e.site_id);
      const { subject, text } = alarmMail(e, context, t, `${config.baseUrl}/app/events/${e.id}`);
      for (const user of await accounts.listUsers(db, e.account_id)) {
        const mail: Mail = { to: user.email, subject, text };
        await jobs.enqueue(db, 'mail', mail, now);
      }
      const view = eventView(e);
      if (t.opened) await webhooks.publish(db, e.account_id, 'alarm.opened', view, now);
      if (t.resolved) await webhooks.publish(db, e.account_id, 'alarm.resolved', view, now);
    }
  }

  committed(): void {
    this.deps.jobs.kick();
  }

  private async context(db: Db, sensorId: string, deviceId: string, siteId: string): Promise<AlarmContext> {
    const row = await db
      .selectFrom('sensors as s')
      .innerJoin('devices as d', 'd.id', 's.device_id')
      .leftJoin('sites as t', (j) => j.on('t.id', '=', siteId))
      .select([
        's.kind',
        's.label',
        's.unit',
        'd.name as device_name',
        'd.local_id',
        't.name as site_name',
        't.timezone',
      ])
      .where('s.id', '=', sensorId)
      .where('d.id', '=', deviceId)
      .executeTakeFirstOrThrow();
    return {
      siteName: row.site_name ?? siteId,
      timezone: row.timezone ?? 'UTC',
      deviceName: row.device_name,
      localId: row.local_id,
      sensorKind: row.kind,
      sensorLabel: row.label,
      unit: row.unit,
    };
  }
}
