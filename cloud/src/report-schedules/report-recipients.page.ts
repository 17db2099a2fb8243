import { escapeHtml } from '../../../shared/html.ts';
import type { RecipientState } from './report-recipients.repository.ts';

/** A schedule as its recipient's page lists it. */
export interface ListedSchedule {
  siteName: string;
  template: string;
  every: string;
}

const STATE_TEXT: Record<RecipientState, string> = {
  pending: 'You have not answered yet: nothing is sent to you until you confirm.',
  confirmed: 'You receive these reports.',
  declined: 'You receive no reports from this account.',
};

const TEMPLATE_TEXT: Record<string, string> = {
  haccp_monthly: 'HACCP temperature report',
  channel_summary: 'sensor summary report',
};

/** A report template as a recipient reads it, in the mail that asks and on the link's page. */
export function reportName(template: string): string {
  return TEMPLATE_TEXT[template] ?? `${template} report`;
}

/** The buttons each state offers: what the recipient can change it to. */
function actions(state: RecipientState): string {
  const confirm = '<button type="submit" name="action" value="confirm">Receive these reports</button>';
  const decline =
    '<button type="submit" name="action" value="decline" class="secondary">Do not send me reports</button>';
  if (state === 'pending') return confirm + decline;
  if (state === 'confirmed') return decline;
  return confirm;
}

/**
 * The page of a report recipient's link (docs/api/report-schedules.md, "Recipients confirm"): the
 * address, who asked, the schedules that name it, and buttons that post the answer. Opening the
 * page changes nothing (mail scanners open links); the buttons do.
 */
export function recipientPage(p: {
  address: string;
  state: RecipientState;
  asker: string | null;
  schedules: ListedSchedule[];
  /** Where the buttons post: the link's own path. */
  path: string;
  /** Said above the rest after an answer. */
  notice?: string;
}): string {
  const who = escapeHtml(p.address);
  const list =
    p.schedules.length === 0
      ? '<p>No schedule of this account names your address now.</p>'
      : `<ul>${p.schedules
          .map(
            (s) =>
              `<li>The ${escapeHtml(reportName(s.template))} of the site “${escapeHtml(s.siteName)}”, every ${escapeHtml(s.every)}</li>`,
          )
          .join('')}</ul>`;
  const asked = p.asker ? `<p>Asked by <strong>${escapeHtml(p.asker)}</strong>.</p>` : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>Scheduled reports for ${who}</title>
<style>
  body { font: 16px/1.5 system-ui, sans-serif; margin: 0; color: #1b1f24; background: #f6f7f9; }
  main { max-width: 34rem; margin: 10vh auto; padding: 1.5rem; background: #fff; border-radius: 8px;
         box-shadow: 0 1px 3px rgba(0,0,0,.15); }
  h1 { font-size: 1.4rem; margin-top: 0; overflow-wrap: anywhere; }
  li { overflow-wrap: anywhere; }
  .notice { padding: .6rem .8rem; border-radius: 6px; background: #e6f4ea; }
  .state { font-weight: 600; }
  form { display: flex; flex-wrap: wrap; gap: .75rem; }
  button { font: inherit; padding: .6rem 1.2rem; min-height: 44px; border: 0; border-radius: 6px;
           background: #0b5cad; color: #fff; cursor: pointer; }
  button.secondary { background: #fff; color: #0b5cad; border: 2px solid #0b5cad; }
  button:focus-visible { outline: 3px solid #f5a623; outline-offset: 2px; }
</style>
</head>
<body>
<main id="main">
${p.notice ? `<p class="notice" role="status">${escapeHtml(p.notice)}</p>` : ''}
<h1>Scheduled reports for ${who}</h1>
${asked}
<p>An account of this service would like to e-mail you:</p>
${list}
<p class="state">${STATE_TEXT[p.state]}</p>
<form method="post" action="${escapeHtml(p.path)}">
${actions(p.state)}
</form>
</main>
</body>
</html>
`;
}

/** The page of a link that opens nothing (mistyped, or from another installation). */
export function unknownRecipientPage(): string {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>Link not valid</title>
<style>body { font: 16px/1.5 system-ui, sans-serif; margin: 10vh auto; max-width: 34rem; padding: 0 1rem; }</style>
</head>
<body><main id="main"><h1>This link is not valid</h1>
<p>Copy the whole link from the mail, or ask the sender of the reports to remove your address.</p></main></body>
</html>
`;
}
