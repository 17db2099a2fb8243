import http from 'node:http';
import https from 'node:https';
import { SIGNATURE_HEADER, signWebhook } from '../../../shared/webhook-signature.ts';
import { MICROS_PER_HOUR } from '../../../shared/time.ts';
import type { Clock } from '../clock.ts';
import type { JobHandler, JobRow } from '../jobs/job-queue.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../storage/database.ts';
import { checkWebhookHost, guardedLookup } from './url-guard.ts';
import type { WebhooksRepository } from './webhooks.repository.ts';

/** Deliveries are retried for this long after they were queued (docs/api.md: "for 24 hours"). */
export const RETRY_WINDOW_MICROS = 24 * MICROS_PER_HOUR;
const TIMEOUT_MS = 10_000;

/** Growing delays: 30 s after the first attempt, doubling, at most an hour apart. */
export function retryDelayMs(attempts: number): number {
  return Math.min(3_600_000, 30_000 * 2 ** Math.max(0, attempts - 1));
}

export type PostResult = { status: number; error: null } | { status: null; error: string };

/**
 * POSTs a body to a checked URL; answers the status once the receiver's headers arrive, or the
 * error (never throws). `timeoutMs` bounds the whole exchange, not only the silences between bytes:
 * a receiver that trickles its answer byte by byte would otherwise hold the job runner, and every
 * mail and delivery queued behind it, for as long as it liked.
 */
export function post(
  url: URL,
  body: string,
  headers: Record<string, string>,
  allowPrivate: boolean,
  timeoutMs = TIMEOUT_MS,
): Promise<PostResult> {
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve) => {
    const deadline = setTimeout(
      () => req.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)),
      timeoutMs,
    );
    const finish = (result: PostResult) => {
      clearTimeout(deadline);
      resolve(result);
    };
    const req = client.request(
      url,
      {
        method: 'POST',
        headers: { ...headers, 'Content-Length': String(Buffer.byteLength(body)) },
        lookup: guardedLookup(allowPrivate),
      },
      (res) => {
        // Only the status matters; the receiver's body is not read.
        finish({ status: res.statusCode ?? 0, error: null });
        res.destroy();
      },
    );
    req.on('error', (err) => finish({ status: null, error: err.message }));
    req.end(body);
  });
}

/**
 * The job that delivers one webhook message: signs the stored body with a fresh timestamp, POSTs it,
 * records the attempt. A 2xx answer is delivered; anything else (another status, a refused or
 * private address, a timeout) is retried with growing delays until 24 hours after the message was
 * queued, then the delivery is marked failed. A deleted webhook's deliveries are cancelled.
 */
export class WebhookDeliveryJob implements JobHandler {
  readonly maxAttempts = 1_000; // bounded by time (RETRY_WINDOW_MICROS), not by count
  readonly priority = 1; // after mail: a receiver may take its 10 s
  readonly retryDelayMs = retryDelayMs;

  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      log: Logger;
      webhooks: WebhooksRepository;
      allowPrivate: boolean;
      userAgent?: string;
    },
  ) {}

  async run(payload: unknown, job: JobRow): Promise<void> {
    const { db, clock, webhooks, allowPrivate } = this.deps;
    const deliveryId = (payload as { delivery_id?: unknown }).delivery_id;
    if (typeof deliveryId !== 'string') throw new Error('webhook job without a delivery id');
    const delivery = await webhooks.delivery(db, deliveryId);
    if (!delivery || delivery.state !== 'pending') return;
    const webhook = await webhooks.webhookById(db, delivery.webhook_id);
    if (!webhook || webhook.deleted_at !== null) {
      await db
        .updateTable('webhook_deliveries')
        .set({ state: 'cancelled', next_attempt_at: null })
        .where('id', '=', deliveryId)
        .execute();
      return;
    }
    const now = clock.nowMicros();
    const started = performance.now();
    const url = new URL(webhook.url);
    let result: PostResult;
    try {
      await checkWebhookHost(url, allowPrivate);
      result = await post(
        url,
        delivery.body,
        {
          'Content-Type': 'application/json',
          'User-Agent': this.deps.userAgent ?? 'sensor-monitoring-webhooks/1',
          [SIGNATURE_HEADER]: signWebhook(webhook.secret, delivery.body, Math.floor(now / 1_000_000)),
          'X-Service-Event': delivery.type,
          'X-Service-Delivery': delivery.id,
        },
        allowPrivate,
      );
    } catch (err) {
      result = { status: null, error: err instanceof Error ? err.message : String(err) };
    }
    const durationMs = Math.round(performance.now() - started);
    const ok = result.status !== null && result.status >= 200 && result.status < 300;
    const attempt = {
      delivery_id: deliveryId,
      attempt: job.attempts,
      at: now,
      status: result.status,
      duration_ms: durationMs,
    };
    if (ok) {
      await webhooks.recordAttempt(
        db,
        { ...attempt, error: null },
        { state: 'delivered', delivered_at: now, next_attempt_at: null },
      );
      return;
    }
    const error = result.error ?? `answered ${result.status}`;
    const next = now + retryDelayMs(job.attempts) * 1000;
    const giveUp = next > delivery.created_at + RETRY_WINDOW_MICROS;
    await webhooks.recordAttempt(
      db,
      { ...attempt, error },
      giveUp ? { state: 'failed', next_attempt_at: null } : { next_attempt_at: next },
    );
    if (giveUp) {
      this.deps.log.warn(
        { delivery_id: deliveryId, webhook_id: webhook.id, attempts: job.attempts },
        'webhook delivery failed for good',
      );
      return;
    }
    throw new Error(`webhook delivery ${deliveryId}: ${error}`);
  }
}
