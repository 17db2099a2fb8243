import { newId, newSecret } from '../../../shared/ids.ts';
import type { AccountsRepository } from '../accounts/accounts.repository.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { NotFound, RateLimited } from '../errors.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import { MAIL_JOB, type MailJob } from '../mail/mail-job.ts';
import { reportName } from './report-recipients.page.ts';
import type { Db } from '../storage/database.ts';
import type {
  RecipientState,
  ReportRecipientRow,
  ReportRecipientsRepository,
} from './report-recipients.repository.ts';

/** New addresses (and addresses asked again) an account may ask by mail in a day. */
export const MAX_ASKS_PER_DAY = 50;
/** Mails asking one address, by every account together, in a day: no one is flooded with them. */
export const MAX_ASKS_PER_ADDRESS = 3;
/** An address that has not answered is asked again by a later schedule after this long. */
export const ASK_AGAIN_AFTER_MICROS = 7 * 24 * 3600 * 1_000_000;
const DAY_MICROS = 24 * 3600 * 1_000_000;

/** The page of a recipient's link: the path, under the dashboard's origin. */
export const RECIPIENT_PAGE = '/app/report-mail';

/** What the mail that asks an address names: the report and how often (the page names the site). */
export interface AskContext {
  template: string;
  every: string;
}

/**
 * Who receives an account's scheduled reports (docs/api/report-schedules.md, "Recipients confirm").
 * A schedule can name any address, so an address that is not one of the account's users receives
 * nothing until it has agreed: it gets one mail asking, with a link to a page that confirms or
 * declines. An account's own users are confirmed without being asked. Every report mail carries the
 * same link, so a recipient can stop them at any time without an account. A declined address is not
 * asked again; it can change its mind on the same page.
 */
export class ReportRecipients {
  constructor(
    private readonly deps: {
      clock: Clock;
      jobs: JobQueue;
      audit: AuditRepository;
      accounts: AccountsRepository;
      recipients: ReportRecipientsRepository;
      baseUrl: string;
    },
  ) {}

  /** The link in every mail to this recipient. */
  link(row: Pick<ReportRecipientRow, 'token'>): string {
    return `${this.deps.baseUrl}${RECIPIENT_PAGE}/${row.token}`;
  }

  /**
   * In the transaction that creates a schedule: records its addresses and queues the mail asking
   * each new one (or one that has not answered for a week). Refused with 429 `rate_limited`, and
   * the schedule not made, past MAX_ASKS_PER_DAY addresses asked by the account in a day, or when an
   * address was asked MAX_ASKS_PER_ADDRESS times in a day by any account.
   */
  async ask(
    trx: Db,
    by: { accountId: string; userId: string },
    addresses: readonly string[],
    context: AskContext,
  ): Promise<void> {
    const { clock, jobs, accounts, recipients } = this.deps;
    const now = clock.nowMicros();
    const lower = [...new Set(addresses.map((a) => a.toLowerCase()))];
    const users = await accounts.listUsers(trx, by.accountId);
    const members = new Set(users.map((u) => u.email.toLowerCase()));
    const asker = users.find((u) => u.id === by.userId)?.email ?? 'A user of this service';
    const known = new Map(
      (await recipients.ofAddresses(trx, by.accountId, lower)).map((r) => [r.address, r]),
    );

    const toAsk: ReportRecipientRow[] = [];
    let askedAgain = 0;
    for (const address of lower) {
      const had = known.get(address);
      if (had) {
        if (had.state === 'pending' && had.asked_at <= now - ASK_AGAIN_AFTER_MICROS) {
          toAsk.push(had);
          askedAgain += 1;
        }
        continue;
      }
      const member = members.has(address);
      const { row, inserted } = await recipients.insertOrFind(trx, {
        id: newId('rcn'),
        account_id: by.accountId,
        address,
        state: member ? 'confirmed' : 'pending',
        token: newSecret('rcp_'),
        asked_by: member ? null : by.userId,
        asked_at: now,
        answered_at: member ? now : null,
      });
      // A schedule made at the same moment naming the address asked it already.
      if (inserted && !member) toAsk.push(row);
    }
    if (toAsk.length === 0) return;

    // Counted in the rows themselves, in this transaction: the rows inserted above count already,
    // those asked again once more.
    const since = now - DAY_MICROS;
    const retryAfter = (first: number | null) =>
      Math.max(1, Math.ceil(((first ?? now) + DAY_MICROS - now) / 1_000_000));
    const asked = await recipients.askedSince(trx, { accountId: by.accountId }, since);
    if (asked.count + askedAgain > MAX_ASKS_PER_DAY) {
      throw new RateLimited(
        retryAfter(asked.first),
        `an account may ask at most ${MAX_ASKS_PER_DAY} new recipients a day to confirm; try again later, or name fewer new addresses`,
      );
    }
    for (const row of toAsk) {
      const again = row.asked_at !== now;
      const ofAddress = await recipients.askedSince(trx, { address: row.address }, since);
      if (ofAddress.count + (again ? 1 : 0) > MAX_ASKS_PER_ADDRESS)
        throw new RateLimited(
          retryAfter(ofAddress.first),
          `${row.address} was asked to confirm reports too often today; try again tomorrow`,
        );
      if (again) await recipients.markAsked(trx, row.id, by.userId, now);
      const mail: MailJob = { ...askMail(row.address, asker, context, this.link(row)), secrets: [row.token] };
      await jobs.enqueue(trx, MAIL_JOB, mail, now);
    }
  }

  /** Each address's state, by lower-cased address; an address with no row is absent. */
  async states(
    db: Db,
    accountId: string,
    addresses: readonly string[],
  ): Promise<Map<string, RecipientState>> {
    const lower = [...new Set(addresses.map((a) => a.toLowerCase()))];
    const rows = await this.deps.recipients.ofAddresses(db, accountId, lower);
    return new Map(rows.map((r) => [r.address, r.state]));
  }

  /** The row of an address that agreed to the account's reports, else undefined. */
  async confirmed(db: Db, accountId: string, address: string): Promise<ReportRecipientRow | undefined> {
    const row = await this.deps.recipients.find(db, accountId, address.toLowerCase());
    return row?.state === 'confirmed' ? row : undefined;
  }

  /** The row a link's token opens: 404 `report_recipient_not_found` for any other token. */
  async byToken(db: Db, token: string): Promise<ReportRecipientRow> {
    const row = token.startsWith('rcp_') ? await this.deps.recipients.findByToken(db, token) : undefined;
    if (!row) throw new NotFound('report_recipient_not_found', 'this link is not valid (or no longer)');
    return row;
  }

  /** The recipient's answer on the link's page, audited in the account (by the recipient's row id). */
  async answer(db: Db, token: string, state: 'confirmed' | 'declined'): Promise<ReportRecipientRow> {
    const { clock, audit, recipients } = this.deps;
    return db.transaction().execute(async (trx) => {
      const row = await this.byToken(trx, token);
      if (row.state === state) return row;
      const now = clock.nowMicros();
      await recipients.answer(trx, row.id, state, now);
      await audit.record(trx, {
        accountId: row.account_id,
        kind: state === 'confirmed' ? 'report_recipient.confirmed' : 'report_recipient.declined',
        by: row.id,
        target: row.id,
        details: { address: row.address },
        ts: now,
      });
      return { ...row, state, answered_at: now };
    });
  }
}

/**
 * The mail asking an address: who asks (a sign-in address, so one its owner receives mail at), what
 * and how often, and the link. No text the account chose (a site's name could be any message): the
 * link's page shows the sites.
 */
function askMail(to: string, asker: string, context: AskContext, link: string): MailJob {
  const what = reportName(context.template);
  return {
    to,
    subject: 'Do you want to receive scheduled reports?',
    text: [
      `${asker} would like to e-mail you a ${what} every ${context.every}, as a PDF. The link below shows which sites.`,
      '',
      'Nothing is sent to you unless you agree. To receive these reports, open this link and confirm:',
      link,
      '',
      'If you do not want them, ignore this mail, or open the link and decline: then this account cannot ask you again.',
    ].join('\n'),
  };
}
