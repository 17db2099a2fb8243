import { OUTBOUND_RETRIES, type JobHandler } from '../jobs/job-queue.ts';
import { checkWebhookHost } from '../webhooks/url-guard.ts';
import { post } from '../webhooks/webhook-delivery.ts';
import type { ChatRequest } from './alert-message.ts';

/**
 * Posts one chat message (payload: a `ChatRequest`); anything but 2xx is retried by the job queue
 * for a day (OUTBOUND_RETRIES).
 */
export const CHAT_POST_JOB = 'alert.chat';

/**
 * Chat webhook URLs are checked like outbound webhooks (no private addresses unless the operator
 * allows them), and posted with the same client.
 */
export function chatPostJobHandler(allowPrivate: boolean): JobHandler {
  return {
    ...OUTBOUND_RETRIES,
    async run(payload) {
      const r = payload as ChatRequest;
      const url = new URL(r.url);
      await checkWebhookHost(url, allowPrivate);
      const result = await post(
        url,
        r.body,
        { ...r.headers, 'User-Agent': 'sensor-monitoring-alerts/1' },
        allowPrivate,
      );
      if (result.status === null || result.status < 200 || result.status >= 300)
        throw new Error(`chat webhook: ${result.error ?? `answered ${result.status}`}`);
    },
  };
}
