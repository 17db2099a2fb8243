import type { Clock } from '../clock.ts';
import { OUTBOUND_RETRIES, type JobHandler } from '../jobs/job-queue.ts';
import type { Logger } from '../logger.ts';
import type { Mail, Mailer } from './mailer.ts';

export const MAIL_JOB = 'mail';

/** What a redacted secret reads as in a finished mail job. */
export const REDACTED = '[redacted]';

/**
 * A queued mail. `secrets` are strings of it (a sign-in code, a link token) that its job row keeps
 * only while the mail may still be sent: once it is sent or given up, they read `[redacted]`.
 */
export interface MailJob extends Mail {
  secrets?: string[];
  /**
   * Microseconds since the epoch after which the mail is no longer worth sending (a sign-in code
   * that has expired): a mail server that comes back later does not deliver it.
   */
  send_by?: number;
}

/**
 * The mail with its secrets replaced: what a finished job row keeps. It runs after the mail went
 * out, so it must not throw (a throw would send the mail again): anything but a string is kept as is.
 */
export function withoutSecrets(job: MailJob): Mail {
  const secrets = (job.secrets ?? []).filter((s) => typeof s === 'string' && s.length > 0);
  const scrub = (text: string) =>
    typeof text === 'string' ? secrets.reduce((t, secret) => t.split(secret).join(REDACTED), text) : text;
  return { to: job.to, subject: scrub(job.subject), text: scrub(job.text) };
}

/**
 * Sends queued mail; a failure is retried by the job queue with the payload intact, for a day
 * (OUTBOUND_RETRIES), except past the mail's `send_by`.
 */
export function mailJobHandler(mailer: Mailer, clock: Clock, log: Logger): JobHandler {
  return {
    ...OUTBOUND_RETRIES,
    run: async (payload) => {
      const { to, subject, text, send_by } = payload as MailJob;
      if (send_by !== undefined && clock.nowMicros() > send_by) {
        log.warn({ send_by }, 'mail not sent: no longer of use (its send_by has passed)');
        return;
      }
      await mailer.send({ to, subject, text });
    },
    finishedPayload: (payload) => withoutSecrets(payload as MailJob),
  };
}
