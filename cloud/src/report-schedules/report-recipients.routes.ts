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
    // The dashboard's page headers: Referrer-Policy same-origin keeps the form's Origin (under
    // no-referrer a browser may send `Origin: null`, which the session cookie's cross-site check
    // refuses for a recipient who is also signed in); the page links to no other origin.
    res.status(status).set(PAGE_HEADERS).set('Cache-Control', 'no-store');
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
          const state = answerOf(await formOf(req));
          await reportRecipients.answer(db, token, state);
          return await page(res, token, 200, ANSWERED[state]);
        } catch (e) {
          return unknown(req, res, e);
        }
      },
    },
  ];
}

/**
 * The posted form, URL-encoded (the page's) or `multipart/form-data` (what RFC 8058 asks of a mail
 * program's one-click), read by the Fetch API's body parser. No content type reads as URL-encoded.
 */
async function formOf(req: Request): Promise<FormData> {
  const type = req.get('Content-Type') ?? 'application/x-www-form-urlencoded';
  try {
    return await new Response(req.ctx.rawBody ?? new Uint8Array(0), {
      headers: { 'Content-Type': type },
    }).formData();
  } catch {
    throw new InvalidRequest(
      'invalid_request',
      'send the form as application/x-www-form-urlencoded or multipart/form-data',
    );
  }
}

/** `action=confirm`, `action=decline`, or RFC 8058's `List-Unsubscribe=One-Click` (a decline). */
function answerOf(form: FormData): 'confirmed' | 'declined' {
  if (form.get('List-Unsubscribe') === 'One-Click') return 'declined';
  const action = form.get('action');
  if (action === 'confirm') return 'confirmed';
  if (action === 'decline') return 'declined';
  throw new InvalidRequest('invalid_request', 'say action=confirm or action=decline', [
    { path: 'action', message: 'must be confirm or decline' },
  ]);
}
