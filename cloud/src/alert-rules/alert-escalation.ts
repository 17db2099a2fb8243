import { DateTime } from 'luxon';
import { MICROS_PER_MINUTE } from '../../../shared/time.ts';
import type { Clock } from '../clock.ts';
import { alertEventView } from '../events/events.view.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { Mail } from '../mail/mailer.ts';
import type { AlertMessage } from '../notify/alert-message.ts';
import { CHAT_POST_JOB } from '../notify/chat-post.ts';
import { CHAT_TARGETS } from '../notify/chat-targets.ts';
import { firstUncovered } from '../rules/derive.ts';
import type { Database, Db } from '../storage/database.ts';
import type { WebhooksService } from '../webhooks/webhooks.service.ts';
import type { Condition } from './alert-evaluator.ts';
import type { AlertAnnouncer } from './alert-engine.ts';
import type { NotifyInput, StepInput } from './alert-rules.body.ts';
import type { AlertEventRow, AlertRulesRepository } from './alert-rules.repository.ts';

/** Sends notification number `n` of an event (a step of the chain, then repeats) and queues the next. */
export const ALERT_NOTIFY_JOB = 'alert.notify';
/** Tells the targets reached that an alarm ended. */
export const ALERT_RESOLVED_JOB = 'alert.resolved';

/**
 * When notification `n` of an event is due, counted from the moment its opening was decided: step
 * `n` at its `after_min`, then (with `repeat_every_min`) repeats after the last step; null: none.
 */
export function notificationAt(notify: NotifyInput, openedAt: number, n: number): number | null {
  const { steps, repeat_every_min: repeat } = notify;
  if (n < steps.length) return openedAt + steps[n]!.after_min * MICROS_PER_MINUTE;
  if (steps.length === 0 || repeat === null) return null;
  const last = openedAt + steps[steps.length - 1]!.after_min * MICROS_PER_MINUTE;
  return last + (n - steps.length + 1) * repeat * MICROS_PER_MINUTE;
}

/** Who notification `n` goes to: its step, or for a repeat everyone the chain has reached. */
export function recipientsOf(notify: NotifyInput, n: number): StepInput[] {
  return n < notify.steps.length ? [notify.steps[n]!] : notify.steps;
}

/** How long a "Resolved" notice waits again for an opening whose time has come but not its job. */
const RESOLVED_RETRY_MICROS = 5_000_000;
/** How long past its opening's time a "Resolved" notice waits for it at most. */
const RESOLVED_GIVE_UP_MICROS = 86_400_000_000;

/**
 * The escalation chain of alert events (docs/api/alert-rules.md). Each notification is a job due
 * at its time (`notificationAt`), queued by the one before, so the chain survives restarts and runs
 * on the injected clock. A job sends only if the event's `notify_n` is still its number (advanced
 * in the same transaction), so a job run twice sends once. The first notification always goes out
 * (a recorded alarm is announced); later ones stop once the event is acknowledged, has ended, or
 * was withdrawn. A notification due inside a silence window of the channel is held until the
 * window ends (silence windows suppress notifications for the window only), like the simple rule's
 * opening (`dueNotifications`).
 */
export class AlertEscalation implements AlertAnnouncer {
  constructor(
    private readonly deps: {
      database: Database;
      clock: Clock;
      jobs: JobQueue;
      webhooks: WebhooksService;
      repository: AlertRulesRepository;
      baseUrl: string;
    },
  ) {}

  register(): void {
    const { jobs } = this.deps;
    jobs.register(ALERT_NOTIFY_JOB, {
      run: async (payload) => {
        const p = payload as { event_id: string; n: number };
        await this.notify(p.event_id, p.n);
      },
    });
    jobs.register(ALERT_RESOLVED_JOB, {
      run: async (payload, job) => this.resolvedNotice((payload as { event_id: string }).event_id, job.id),
    });
  }

  async opened(db: Db, event: AlertEventRow, now: number): Promise<void> {
    await this.deps.jobs.enqueue(db, ALERT_NOTIFY_JOB, { event_id: event.id, n: 0 }, now);
  }

  async resolved(db: Db, event: AlertEventRow, now: number): Promise<void> {
    await this.deps.jobs.enqueue(db, ALERT_RESOLVED_JOB, { event_id: event.id }, now);
  }

  committed(): void {
    this.deps.jobs.kick();
  }

  /**
   * A silence window of the channel was created or ended: the next notification of each escalating
   * event is looked at again now (one held until the window's planned end goes out when it ends
   * early). A copy of a job already queued sends nothing: the first run advances `notify_n`.
   */
  async silencesChanged(db: Db, seq: number, now: number): Promise<void> {
    for (const e of await this.deps.repository.escalating(db, seq))
      await this.deps.jobs.enqueue(db, ALERT_NOTIFY_JOB, { event_id: e.id, n: e.notify_n }, now);
  }

  private async notify(eventId: string, n: number): Promise<void> {
    const { database, jobs, repository } = this.deps;
    await database.db.transaction().execute(async (db) => {
      const event = await repository.findEvent(db, eventId);
      if (!event || event.withdrawn_at !== null || event.notified_open_at === null) return;
      if (n > 0 && (event.acknowledged_at !== null || event.ended_at !== null)) return;
      const rule = (await repository.rulesById(db, [event.rule_id])).get(event.rule_id);
      if (!rule || (n > 0 && rule.deleted_at !== null)) return;
      const notify = JSON.parse(rule.notify) as NotifyInput;
      const now = this.deps.clock.nowMicros();
      const due = notificationAt(notify, event.notified_open_at, n);
      if (due === null) return;
      if (due > now) {
        // the first step waits for its own delay (the opening queues it at once)
        await jobs.enqueue(db, ALERT_NOTIFY_JOB, { event_id: event.id, n }, due);
        return;
      }
      const windows = (await repository.silences(db, [event.sensor_seq])).get(event.sensor_seq) ?? [];
      if (firstUncovered(due, now, windows) === null) {
        // due inside a silence window: held until the window ends
        const release = firstUncovered(now, Infinity, windows)!;
        await jobs.enqueue(db, ALERT_NOTIFY_JOB, { event_id: event.id, n }, release);
        return;
      }
      // Reminders that fell due meanwhile (held by a silence window, or a late run) are not sent
      // in a burst: the chain goes on with the first one after now.
      let m = n + 1;
      let next = notificationAt(notify, event.notified_open_at, m);
      while (next !== null && next <= now && m >= notify.steps.length)
        next = notificationAt(notify, event.notified_open_at, ++m);
      if (!(await repository.claimNotification(db, event.id, n, m))) return;
      const message = await this.message(
        db,
        event,
        rule.name,
        n === 0 || n < notify.steps.length ? 'opened' : 'reminder',
      );
      await this.send(db, event, recipientsOf(notify, n), message, 'alarm.opened', now);
      if (next !== null)
        await jobs.enqueue(db, ALERT_NOTIFY_JOB, { event_id: event.id, n: m }, Math.max(next, now));
    });
    jobs.kick();
  }

  /**
   * The notice goes out with its job's completion in one transaction, so a run of the same job
   * claimed again (its first process stalled past the claim) sends nothing.
   */
  private async resolvedNotice(eventId: string, jobId: string): Promise<void> {
    const { database, jobs, repository } = this.deps;
    await database.db.transaction().execute(async (db) => {
      if (!(await jobs.finishIn(db, jobId))) return;
      const event = await repository.findEvent(db, eventId);
      if (!event) return;
      const rule = (await repository.rulesById(db, [event.rule_id])).get(event.rule_id);
      if (!rule) return;
      const notify = JSON.parse(rule.notify) as NotifyInput;
      const first = notificationAt(notify, event.notified_open_at ?? 0, 0);
      if (first === null) return;
      if (event.notify_n === 0) {
        // Withdrawn before its opening went out: the opening never goes out (`notify` skips a
        // withdrawn event), so nobody was told anything, and there is nothing to take back.
        if (event.withdrawn_at !== null || event.notified_open_at === null) return;
        // The opening has not gone out yet (its step waits, a silence window holds it, or its job
        // runs now elsewhere): resolve right after it. Never at a time already past, which the
        // queue would claim again at once, ahead of every other job.
        const windows = (await repository.silences(db, [event.sensor_seq])).get(event.sensor_seq) ?? [];
        const opening = firstUncovered(first, Infinity, windows)!;
        const now = this.deps.clock.nowMicros();
        // An opening a day overdue has failed for good (its job ran out of attempts): stop waiting.
        if (now - opening > RESOLVED_GIVE_UP_MICROS) return;
        const at = opening + 1 > now ? opening + 1 : now + RESOLVED_RETRY_MICROS;
        await this.deps.jobs.enqueue(db, ALERT_RESOLVED_JOB, { event_id: event.id }, at);
        return;
      }
      const reached = notify.steps.slice(0, Math.min(event.notify_n, notify.steps.length));
      const message = await this.message(db, event, rule.name, 'resolved');
      await this.send(db, event, reached, message, 'alarm.resolved', this.deps.clock.nowMicros());
    });
    jobs.kick();
  }

  /** Queues the mails, webhook deliveries and chat posts of one notification. */
  private async send(
    db: Db,
    event: AlertEventRow,
    steps: readonly StepInput[],
    message: AlertMessage,
    type: 'alarm.opened' | 'alarm.resolved',
    now: number,
  ): Promise<void> {
    const { jobs, repository, webhooks } = this.deps;
    const userIds = [...new Set(steps.flatMap((s) => s.user_ids))];
    for (const user of await repository.usersByIds(db, event.account_id, userIds)) {
      const mail: Mail = {
        to: user.email,
        subject: message.title,
        text: `${message.text}\n\n${message.url}\n`,
      };
      await jobs.enqueue(db, 'mail', mail, now);
    }
    const webhookIds = [...new Set(steps.flatMap((s) => s.webhook_ids))];
    if (webhookIds.length > 0)
      await webhooks.publish(db, event.account_id, type, alertEventView(event), now, webhookIds);
    const chats = new Map(steps.flatMap((s) => s.chat).map((c) => [`${c.type} ${c.url}`, c]));
    for (const c of chats.values())
      await jobs.enqueue(db, CHAT_POST_JOB, CHAT_TARGETS[c.type].request(c.url, message), now);
  }

  private async message(
    db: Db,
    e: AlertEventRow,
    ruleName: string,
    phase: AlertMessage['phase'],
  ): Promise<AlertMessage> {
    // The event's site (where the alarm started), not the device's site now: a device moved since
    // is told of by the site and time zone of the alarm.
    const ctx = await db
      .selectFrom('sensors as s')
      .innerJoin('devices as d', 'd.id', 's.device_id')
      .leftJoin('sites as t', (join) => join.on('t.id', '=', e.site_id))
      .select(['s.kind', 's.label', 's.unit', 'd.name as device_name', 't.name as site_name', 't.timezone'])
      .where('s.id', '=', e.sensor_id)
      .executeTakeFirst();
    const unit = ctx?.unit ? ` ${ctx.unit}` : '';
    const what = describe(JSON.parse(e.condition) as Condition, unit);
    const channel = `${ctx?.device_name ?? e.device_id} ${ctx?.label ?? ctx?.kind ?? ''}`.trim();
    const where = ctx?.site_name ?? e.site_id;
    const tz = ctx?.timezone ?? 'UTC';
    const local = (t: number) =>
      DateTime.fromMillis(Math.floor(t / 1000), { zone: tz }).toFormat('yyyy-LL-dd HH:mm ZZZZ');
    const head =
      phase === 'resolved'
        ? 'Resolved'
        : phase === 'reminder'
          ? `Reminder ${e.severity.toUpperCase()}`
          : e.severity.toUpperCase();
    const lines = [
      `Rule: ${ruleName}`,
      `Channel: ${channel} at ${where}`,
      `Since: ${local(e.started_at)}`,
      ...(e.peak_value !== null ? [`Peak: ${e.peak_value}${e.kind === 'rate_of_change' ? '' : unit}`] : []),
      ...(e.ended_at !== null ? [`Ended: ${local(e.ended_at)}`] : []),
    ];
    return {
      phase,
      severity: e.severity,
      title: `${head}: ${channel} ${what} at ${where} (${ruleName})`,
      text: lines.join('\n'),
      url: `${this.deps.baseUrl}/app/events/${e.id}`,
    };
  }
}

/** A condition in words, e.g. `above 8 °C`. */
export function describe(c: Condition, unit: string): string {
  switch (c.type) {
    case 'above':
      return `above ${c.value}${unit}`;
    case 'below':
      return `below ${c.value}${unit}`;
    case 'outside':
      return `outside ${c.min}–${c.max}${unit}`;
    case 'no_data':
      return `no data for ${c.minutes} min`;
    case 'rate_of_change':
      return `${c.direction === 'rise' ? 'rose' : c.direction === 'fall' ? 'fell' : 'changed'} by more than ${c.change}${unit} within ${c.within_min} min`;
  }
}
