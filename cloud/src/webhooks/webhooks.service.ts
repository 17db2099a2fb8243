import { newId, newSecret } from '../../../shared/ids.ts';
import { formatSeconds } from '../../../shared/time.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { notFound } from '../errors.ts';
import type { UserPrincipal } from '../http/context.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { DeviceStateChange } from '../ingest/ingest.types.ts';
import type { Db } from '../storage/database.ts';
import { checkWebhookHost, parseWebhookUrl } from './url-guard.ts';
import type { WebhookRow, WebhooksRepository } from './webhooks.repository.ts';

/** How long a finished delivery and its attempts stay listed (`GET /v1/webhooks/{id}/deliveries`). */
export const DELIVERY_RETENTION_MICROS = 30 * 24 * 3600 * 1_000_000;
/** Event types a webhook can subscribe to (docs/api/rules.md). */
export const WEBHOOK_EVENT_TYPES = [
  'alarm.opened',
  'alarm.resolved',
  'alarm.acknowledged',
  'device.offline',
  'device.online',
  'report.ready',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export const WEBHOOK_SECRET_PREFIX = 'whsec_';
export const DELIVERY_JOB = 'webhook.deliver';

export interface CreatedWebhook {
  webhook: WebhookRow;
}

export function webhookView(w: WebhookRow) {
  return {
    id: w.id,
    url: w.url,
    events: JSON.parse(w.events) as WebhookEventType[],
    created_at: formatSeconds(w.created_at),
  };
}

/**
 * Outbound webhooks: registration, and `publish`, which every producer of a notification calls in
 * the transaction of the change it announces (an alarm, an acknowledgement, a device going offline,
 * a report being ready): one delivery row and one job per subscribed webhook, so nothing announced
 * is lost and each attempt is recorded (`webhook-delivery.ts`).
 */
export class WebhooksService {
  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      config: Config;
      webhooks: WebhooksRepository;
      audit: AuditRepository;
      jobs: JobQueue;
    },
  ) {}

  async create(by: UserPrincipal, input: { url: string; events: WebhookEventType[] }): Promise<WebhookRow> {
    const { db, clock, config, webhooks, audit } = this.deps;
    const url = parseWebhookUrl(input.url);
    await checkWebhookHost(url, config.webhookAllowPrivate);
    const now = clock.nowMicros();
    const row: WebhookRow = {
      id: newId('wh'),
      account_id: by.accountId,
      url: url.toString(),
      events: JSON.stringify([...new Set(input.events)]),
      secret: newSecret(WEBHOOK_SECRET_PREFIX),
      created_by: by.userId,
      created_at: now,
      deleted_at: null,
    };
    await db.transaction().execute(async (trx) => {
      await webhooks.insert(trx, row);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'webhook.created',
        by: by.userId,
        target: row.id,
        details: { url: row.url, events: JSON.parse(row.events) as unknown },
        ts: now,
      });
    });
    return row;
  }

  async get(accountId: string, id: string): Promise<WebhookRow> {
    const row = await this.deps.webhooks.find(this.deps.db, accountId, id);
    if (!row) throw notFound('webhook');
    return row;
  }

  /** Deletes the webhook; deliveries still pending are cancelled. */
  async delete(by: UserPrincipal, id: string): Promise<void> {
    const { db, clock, webhooks, audit } = this.deps;
    const now = clock.nowMicros();
    await db.transaction().execute(async (trx) => {
      const row = await webhooks.find(trx, by.accountId, id);
      if (!row) throw notFound('webhook');
      await webhooks.softDelete(trx, id, now);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'webhook.deleted',
        by: by.userId,
        target: id,
        details: { url: row.url },
        ts: now,
      });
    });
  }

  /**
   * Queues `{id, type, created_at, data}` for every webhook of the account subscribed to `type`, or,
   * with `only`, for those of the listed webhooks still live (an alert rule's chosen targets).
   * Call it with the transaction of the change; the body is fixed now and signed at each attempt.
   */
  async publish(
    db: Db,
    accountId: string,
    type: WebhookEventType,
    data: unknown,
    now: number,
    only?: readonly string[],
  ): Promise<number> {
    const { webhooks, jobs } = this.deps;
    const targets = (await webhooks.live(db, accountId)).filter((w) =>
      only ? only.includes(w.id) : (JSON.parse(w.events) as string[]).includes(type),
    );
    for (const w of targets) {
      const id = newId('whd');
      const body = JSON.stringify({ id, type, created_at: formatSeconds(now), data });
      await webhooks.insertDelivery(db, {
        id,
        account_id: accountId,
        webhook_id: w.id,
        type,
        body,
        state: 'pending',
        attempts: 0,
        created_at: now,
        last_attempt_at: null,
        next_attempt_at: now,
        delivered_at: null,
        last_status: null,
        last_error: null,
      });
      await jobs.enqueue(db, DELIVERY_JOB, { delivery_id: id }, now);
    }
    return targets.length;
  }

  /**
   * `device.online` / `device.offline` for devices the ingest core flipped (an uplink after silence,
   * a Shelly `lwt`, an MQTT last-will). Runs as the `device_state` job that ingest queued in the
   * same transaction as the flip, so a crash in between loses nothing; the job is marked done in
   * the transaction that queues the deliveries, so a second run of it (its claim lapsed, or its
   * process died before the job was marked done) queues nothing again: each delivery keeps one id.
   */
  async publishDeviceStates(changes: DeviceStateChange[], jobId: string): Promise<void> {
    const { db, clock, jobs } = this.deps;
    const now = clock.nowMicros();
    let queued = 0;
    await db.transaction().execute(async (trx) => {
      if (!(await jobs.finishIn(trx, jobId))) return;
      for (const c of changes) {
        queued += await this.publish(
          trx,
          c.accountId,
          c.online ? 'device.online' : 'device.offline',
          {
            device_id: c.deviceId,
            site_id: c.siteId,
            local_id: c.localId,
            online: c.online,
            at: formatSeconds(c.at),
          },
          now,
        );
      }
    });
    if (queued > 0) this.kick();
  }

  /**
   * Removes finished deliveries (and their attempts) queued more than DELIVERY_RETENTION_MICROS ago:
   * each keeps its whole message, and an account's deliveries would otherwise grow without end.
   */
  pruneDeliveries(): Promise<number> {
    const { db, clock, webhooks } = this.deps;
    return webhooks.pruneFinished(db, clock.nowMicros() - DELIVERY_RETENTION_MICROS);
  }

  /** After the transaction that published committed: start delivering at once. */
  kick(): void {
    this.deps.jobs.kick();
  }
}
