import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { DEVICE_STATE_JOB } from '../ingest/ingest.steps.ts';
import type { DeviceStateChange, Ingest } from '../ingest/ingest.types.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../storage/database.ts';
import { WebhookDeliveryJob } from './webhook-delivery.ts';
import { WebhooksRepository } from './webhooks.repository.ts';
import { DELIVERY_JOB, WebhooksService } from './webhooks.service.ts';

/**
 * Webhooks: their slice of the services. Registers the delivery job, and turns the online/offline
 * flips ingest queues as a job in its own transaction into webhooks, at once after the commit.
 */
export function buildWebhooks(deps: {
  db: Db;
  clock: Clock;
  config: Config;
  log: Logger;
  audit: AuditRepository;
  jobs: JobQueue;
  ingest: Ingest;
}): { webhooksRepository: WebhooksRepository; webhooks: WebhooksService } {
  const { db, clock, config, log, audit, jobs, ingest } = deps;
  const webhooksRepository = new WebhooksRepository();
  const webhooks = new WebhooksService({ db, clock, config, webhooks: webhooksRepository, audit, jobs });
  jobs.register(
    DELIVERY_JOB,
    new WebhookDeliveryJob({
      db,
      clock,
      log: log.child({ module: 'webhooks' }),
      webhooks: webhooksRepository,
      allowPrivate: config.webhookAllowPrivate,
    }),
  );
  jobs.register(DEVICE_STATE_JOB, {
    run: (payload, job) => webhooks.publishDeviceStates(payload as DeviceStateChange[], job.id),
  });
  ingest.onDeviceState(() => webhooks.kick());
  return { webhooksRepository, webhooks };
}
