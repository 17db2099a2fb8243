import type { SessionsEnded } from '../auth/auth.service.ts';
import type { AlarmEventRow } from '../events/events.repository.ts';
import { accountTopic, type NotificationHub } from '../hub/notification-hub.ts';
import type { DeviceStateChange } from '../ingest/ingest.types.ts';
import type { EvaluationChanges } from '../rules/rule-engine.ts';
import type { SensorsRepository } from '../sensors/sensors.repository.ts';
import type { Db } from '../storage/database.ts';

/** How an alarm event changed, as the stream names it (`alarm.<change>`, docs/api/dashboard.md). */
export type AlarmChange = 'opened' | 'updated' | 'resolved' | 'acknowledged';

/** The hub messages of the live updates: what changed, by id, on the account's topic. */
export type LiveMessage =
  | { type: 'sensors.changed'; ids: string[] }
  | { type: 'alarm.changed'; id: string; change: AlarmChange }
  | { type: 'device.changed'; id: string }
  | { type: 'sessions.ended'; userId: string; sessionId: string | null };

/** Channels named per query when the fold's seqs are turned into sensor ids. */
const SEQ_CHUNK = 500;

/** What the stream needs of an event row of either kind (the simple rule's or an alert rule's). */
type EventRef = Pick<AlarmEventRow, 'id' | 'account_id' | 'ended_at' | 'withdrawn_at'>;

function isOpen(e: EventRef): boolean {
  return e.ended_at === null && e.withdrawn_at === null;
}

/**
 * How an evaluation changed an event: `opened` when it is open now and was not (new, or reinstated),
 * `resolved` when it is no longer open and was (ended, or withdrawn; a new event already ended
 * counts), `updated` otherwise (a late measurement moved `started_at` or raised `peak_value`).
 */
export function alarmChange(before: EventRef | null, after: EventRef): AlarmChange {
  const wasOpen = before !== null && isOpen(before);
  if (isOpen(after)) return wasOpen ? 'updated' : 'opened';
  return wasOpen || before === null ? 'resolved' : 'updated';
}

/**
 * Publishes what the dashboard shows live to each account's hub topic: the channels a fold moved
 * (new last values), what the rule engine changed (states, alarm events), the alert engine's events,
 * acknowledgements, devices
 * going online or offline, and sign-outs. Each publisher calls it after its commit; nothing is
 * looked up when nobody listens.
 */
export class LiveUpdates {
  constructor(
    private readonly deps: {
      db: Db;
      hub: NotificationHub;
      sensorsRepository: SensorsRepository;
    },
  ) {}

  private publish(accountId: string, message: LiveMessage): void {
    this.deps.hub.publish(accountTopic(accountId), message);
  }

  private listened(accountId: string): boolean {
    return this.deps.hub.listened(accountTopic(accountId));
  }

  /** A fold merged these channels' last values. */
  async folded(seqs: readonly number[]): Promise<void> {
    if (!this.deps.hub.active()) return;
    const byAccount = new Map<string, string[]>();
    for (let i = 0; i < seqs.length; i += SEQ_CHUNK) {
      const refs = await this.deps.sensorsRepository.refsOfSeqs(this.deps.db, seqs.slice(i, i + SEQ_CHUNK));
      for (const { id, account_id } of refs) {
        if (!this.listened(account_id)) continue;
        const ids = byAccount.get(account_id);
        if (ids) ids.push(id);
        else byAccount.set(account_id, [id]);
      }
    }
    for (const [accountId, ids] of byAccount) this.publish(accountId, { type: 'sensors.changed', ids });
  }

  /** The rule engine changed states and events. */
  evaluated(changes: EvaluationChanges): void {
    const byAccount = new Map<string, string[]>();
    for (const { accountId, sensorId } of changes.sensors) {
      if (!this.listened(accountId)) continue;
      const ids = byAccount.get(accountId);
      if (ids) ids.push(sensorId);
      else byAccount.set(accountId, [sensorId]);
    }
    for (const [accountId, ids] of byAccount) this.publish(accountId, { type: 'sensors.changed', ids });
    for (const { before, after } of changes.events) {
      this.publish(after.account_id, {
        type: 'alarm.changed',
        id: after.id,
        change: alarmChange(before, after),
      });
    }
  }

  /**
   * The alert engine wrote these events: each is an `alarm.changed`, and its sensor a
   * `sensors.changed` (its `alert_severity` follows the open alert alarms).
   */
  alertsChanged(
    changes: readonly { before: EventRef | null; after: EventRef & { sensor_id: string } }[],
  ): void {
    const byAccount = new Map<string, Set<string>>();
    for (const { after } of changes) {
      if (!this.listened(after.account_id)) continue;
      const ids = byAccount.get(after.account_id);
      if (ids) ids.add(after.sensor_id);
      else byAccount.set(after.account_id, new Set([after.sensor_id]));
    }
    for (const [accountId, ids] of byAccount)
      this.publish(accountId, { type: 'sensors.changed', ids: [...ids] });
    for (const { before, after } of changes) {
      this.publish(after.account_id, {
        type: 'alarm.changed',
        id: after.id,
        change: alarmChange(before, after),
      });
    }
  }

  /** A sensor's rule changed (its thresholds, whether or not its state moved). */
  ruleUpdated(sensor: { id: string; account_id: string }): void {
    if (!this.listened(sensor.account_id)) return;
    this.publish(sensor.account_id, { type: 'sensors.changed', ids: [sensor.id] });
  }

  acknowledged(event: Pick<AlarmEventRow, 'id' | 'account_id'>): void {
    this.publish(event.account_id, { type: 'alarm.changed', id: event.id, change: 'acknowledged' });
  }

  devicesChanged(changes: readonly DeviceStateChange[]): void {
    for (const c of changes) this.publish(c.accountId, { type: 'device.changed', id: c.deviceId });
  }

  sessionsEnded(ended: SessionsEnded): void {
    this.publish(ended.accountId, {
      type: 'sessions.ended',
      userId: ended.userId,
      sessionId: ended.sessionId,
    });
  }
}
