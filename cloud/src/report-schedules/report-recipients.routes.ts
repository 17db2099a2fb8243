import type { Request, Response } from 'express';
import type { AccountsRepository } from '../accounts/accounts.repository.ts';
import { ApiError, InvalidRequest } from '../errors.ts';
import { param } from '../http/context.ts';
import type { RouteDef } from '../http/route-table.ts';
import { PAGE_HEADERS } from '../pages/pages.static.ts';
import type { Db } from '../storage/database.ts';
import { recipientPage, unknownRecipientPage } from './report-recipients.page.ts';
import { RECIPIENT_PAGE, type ReportRecipients } from './report-recipients.ts';
import type { ReportSchedules } from './report-schedules.service.ts';

export interface ReportRecipientRoutesDeps {
  reportRecipients: ReportRecipients;
  reportSchedules: ReportSchedules;
  accounts: AccountsRepository;
  db: Db;
}

/** What the link's page says after an answer. */
const ANSWERED: Record<'confirmed' | 'declined', string> = {
  confirmed: 'Thank you: you will receive these reports.',
  declined: 'Done: no more reports from this account are sent to you.',
};

/**
 * The link in every mail to a report recipient (docs/api/report-schedules.md, "Recipients
 * confirm"): a page that confirms or declines, for a person with no account. The link's token is
 * the only credential; opening it changes nothing, so mail scanners cannot answer for anyone.
 */
export function reportRecipientRoutes(s: ReportRecipientRoutesDeps): RouteDef[] {
  const { reportRecipients, reportSchedules, accounts, db } = s;

  const page = async (res: Response, token: string, status: number, notice?: string) => {
    const row = await reportRecipients.byToken(db, token);
    const asker = row.asked_by ? ((await accounts.findUser(db, row.asked_by))?.email ?? null) : null;
    res
      .status(status)
      .set(PAGE_HEADERS)
      .set({ 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' });
    res.type('html');
    res.send(
      recipientPage({
        address: row.address,
        state: row.state,
        asker,
        schedules: await reportSchedules.forRecipient(row.account_id, row.address),
        path: `${RECIPIENT_PAGE}/${token}`,
        ...(notice === undefined ? {} : { notice }),
      }),
    );
    return undefined;
  };

  /** An unknown token: a page for a browser, the error envelope for anything else. */
  const unknown = (req: Request, res: Response, e: unknown): undefined => {
    if (e instanceof ApiError && e.status === 404 && req.accepts(['json', 'html']) === 'html') {
      res.status(404).set(PAGE_HEADERS).set('Cache-Control', 'no-store').type('html');
      res.send(unknownRecipientPage());
      return undefined;
    }
    throw e;
  };

  return [
    {
      method: 'get',
      path: `${RECIPIENT_PAGE}/:token`,
      auth: 'none',
      summary: "A report recipient's page: the schedules naming the address, and its answer",
      success: { status: 200, description: 'an HTML page; opening it changes nothing' },
      errors: ['report_recipient_not_found'],
      handler: async (req, res) => {
        try {
          return await page(res, param(req, 'token'), 200);
        } catch (e) {
          return unknown(req, res, e);
        }
      },
    },
    {
      method: 'post',
      path: `${RECIPIENT_PAGE}/:token`,
      auth: 'none',
      body: 'raw',
      summary:
        "A report recipient's answer: the page's form (action=confirm or decline), or a mail program's one-click unsubscribe (RFC 8058)",
      success: {
        status: 200,
        description: 'the page, saying the answer was recorded (also for a one-click unsubscribe)',
      },
      errors: ['report_recipient_not_found', 'invalid_request'],
      handler: async (req, res) => {
        const token = param(req, 'token');
        try {
          const form = new URLSearchParams(req.ctx.rawBody?.toString('utf8') ?? '');
          const state = answerOf(form);
          await reportRecipients.answer(db, token, state);
          return await page(res, token, 200, ANSWERED[state]);
        } catch (e) {
          return unknown(req, res, e);
        }
      },
    },
  ];
}

/** `action=confirm`, `action=decline`, or RFC 8058's `List-Unsubscribe=One-Click` (a decline). */
function answerOf(form: URLSearchParams): 'confirmed' | 'declined' {
  if (form.get('List-Unsubscribe') === 'One-Click') return 'declined';
  const action = form.get('action');
  if (action === 'confirm') return 'confirmed';
  if (action === 'decline') return 'declined';
  throw new InvalidRequest('invalid_request', 'say action=confirm or action=decline', [
    { path: 'action', message: 'must be confirm or decline' },
  ]);
}
