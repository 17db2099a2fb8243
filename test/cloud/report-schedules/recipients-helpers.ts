import { expect } from '@jest/globals';
import type { SentMail } from '../../../cloud/src/mail/mailer.ts';
import type { Answer } from '../../helpers/http.ts';
import type { TestCloud } from '../../helpers/cloud.ts';

/** The subject of the mail that asks an address to confirm a schedule's reports. */
export const ASK_SUBJECT = 'Do you want to receive scheduled reports?';

/** Every mail asking an address to confirm, sent from now on (call before creating schedules). */
export function collectAsks(cloud: TestCloud): SentMail[] {
  const asks: SentMail[] = [];
  cloud.cloud.services.mailer.on('sent', (mail) => {
    if (mail.subject === ASK_SUBJECT) asks.push(mail);
  });
  return asks;
}

/** The path of the link in a mail to a recipient (`/app/report-mail/rcp_…`). */
export function recipientPath(text: string): string {
  const link = /https?:\/\/\S+?(\/app\/report-mail\/rcp_[0-9A-Za-z]+)/.exec(text);
  expect(link).not.toBeNull();
  return link![1]!;
}

/** The recipient's answer, as the page's form posts it. */
export function answerOnPage(cloud: TestCloud, path: string, action: 'confirm' | 'decline'): Promise<Answer> {
  return cloud.http.post(path, undefined, {
    raw: `action=${action}`,
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
  });
}

/**
 * Sends the queued ask mails and has each of `addresses` answer its own: what a recipient does
 * before a schedule's first report reaches it.
 */
export async function answerAsks(
  cloud: TestCloud,
  asks: SentMail[],
  addresses: readonly string[],
  action: 'confirm' | 'decline' = 'confirm',
): Promise<void> {
  await cloud.cloud.services.jobs.drain();
  for (const address of addresses) {
    const mail = asks.find((m) => m.to.toLowerCase() === address.toLowerCase());
    expect({ address, asked: Boolean(mail) }).toEqual({ address, asked: true });
    const answer = await answerOnPage(cloud, recipientPath(mail!.text), action);
    expect(answer.status).toBe(200);
  }
}
