import { useEffect, useState } from 'preact/hooks';
import { all, api, API_BASE, ApiError, seg, type Page } from '../api.ts';
import { ConfirmButton, ScrollTable } from '../components/actions.tsx';
import { SelectField, ErrorBox, Field, Loading, Time } from '../components/ui.tsx';
import { useLoad, useSubmit, useTitle } from '../hooks.ts';
import type { Site } from '../types.ts';

/** A report and a report schedule as the API shows them (docs/api/reports.md, report-schedules.md). */
interface Report {
  id: string;
  site_id: string;
  template: string;
  period: { from: string; to: string };
  language: string;
  state: 'queued' | 'running' | 'ready' | 'failed';
  error: string | null;
  created_at: string;
  ready_at: string | null;
  size_bytes: number | null;
  sha256: string | null;
}
interface Schedule {
  id: string;
  site_id: string;
  template: string;
  language: string;
  every: 'month' | 'week';
  recipients: string[];
  recipient_status: { address: string; status: RecipientStatus }[];
  created_at: string;
  next_run_at: string;
}

/** Whether an address agreed to receive the account's reports (docs/api/report-schedules.md). */
type RecipientStatus = 'confirmed' | 'pending' | 'declined';

/** What a recipient's status says beside the address; a confirmed address needs no word. */
const STATUS_TEXT: Record<RecipientStatus, string | null> = {
  confirmed: null,
  pending: 'awaiting confirmation',
  declined: 'declined',
};

const TEMPLATES = [
  { value: 'haccp_monthly', text: 'HACCP temperature log' },
  { value: 'channel_summary', text: 'Summary of every channel' },
];
const LANGUAGES = [
  { value: 'en', text: 'English' },
  { value: 'de', text: 'Deutsch' },
  { value: 'fr', text: 'Français' },
];
const templateText = (t: string) => TEMPLATES.find((x) => x.value === t)?.text ?? t;
const languageText = (l: string) => LANGUAGES.find((x) => x.value === l)?.text ?? l;

/** The UTC offset of a time zone at an instant, in minutes east of UTC. */
function offsetMinutes(timeZone: string, ms: number): number {
  const name =
    new Intl.DateTimeFormat('en-US', { timeZone, timeZoneName: 'longOffset' })
      .formatToParts(ms)
      .find((p) => p.type === 'timeZoneName')?.value ?? 'GMT';
  const m = /GMT([+-])(\d{2}):(\d{2})/.exec(name);
  return m ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3])) : 0;
}

/** The first day of a month, 00:00 in the site's time zone, as RFC 3339 with that day's offset. */
export function monthStart(timeZone: string, year: number, month: number): string {
  const y = year + Math.floor((month - 1) / 12);
  const m = ((((month - 1) % 12) + 12) % 12) + 1;
  const midnightUtc = Date.UTC(y, m - 1, 1);
  // The offset at local midnight: judged at the guess, then at the instant that guess names.
  const offset = offsetMinutes(timeZone, midnightUtc - offsetMinutes(timeZone, midnightUtc) * 60_000);
  const sign = offset < 0 ? '-' : '+';
  const abs = Math.abs(offset);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${y}-${pad(m)}-01T00:00:00${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
}

/** Last month, as the month picker's value (`YYYY-MM`): the usual month to report. */
function lastMonth(): string {
  const d = new Date();
  d.setDate(1);
  d.setMonth(d.getMonth() - 1);
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}`;
}

/** A date's parts in a time zone. */
function partsIn(timeZone: string, iso: string) {
  const parts = new Intl.DateTimeFormat('en-GB', {
    timeZone,
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    hourCycle: 'h23',
  }).formatToParts(new Date(iso));
  const get = (type: string) => Number(parts.find((p) => p.type === type)?.value ?? 0);
  return { y: get('year'), m: get('month'), d: get('day'), h: get('hour'), min: get('minute') };
}

/**
 * A report's period as the site reads it: "March 2026" for a calendar month in the site's time,
 * else its first and last day there.
 */
export function periodText(period: { from: string; to: string }, timeZone: string): string {
  const from = partsIn(timeZone, period.from);
  const to = partsIn(timeZone, period.to);
  const midnight = (p: typeof from) => p.d === 1 && p.h === 0 && p.min === 0;
  const nextMonth = from.m === 12 ? { y: from.y + 1, m: 1 } : { y: from.y, m: from.m + 1 };
  if (midnight(from) && midnight(to) && to.y === nextMonth.y && to.m === nextMonth.m) {
    return new Intl.DateTimeFormat(undefined, { timeZone, month: 'long', year: 'numeric' }).format(
      new Date(period.from),
    );
  }
  const day = new Intl.DateTimeFormat(undefined, { timeZone, dateStyle: 'medium' });
  const last = new Date(new Date(period.to).getTime() - 1);
  return `${day.format(new Date(period.from))} – ${day.format(last)}`;
}

function bytes(n: number | null): string {
  if (n === null) return '';
  return n < 1024 * 1024 ? `${Math.max(1, Math.round(n / 1024))} KB` : `${(n / 1024 / 1024).toFixed(1)} MB`;
}

const STATE_TEXT: Record<Report['state'], string> = {
  queued: 'Waiting to be made',
  running: 'Being made',
  ready: 'Ready',
  failed: 'Failed',
};

/** Reports: request one (site, template, month, language), watch it being made, download; schedules. */
export function Reports() {
  useTitle('Reports');
  const sites = useLoad(() => all<Site>('/sites'), []);
  const reports = useLoad(() => api.get<Page<Report>>('/reports?limit=20'), []);
  const list = reports.data?.data ?? [];
  const pending = list.some((r) => r.state === 'queued' || r.state === 'running');

  // Asks again every 1.5 s while a report is being made, so its progress and link appear.
  useEffect(() => {
    if (!pending) return;
    const timer = setTimeout(reports.reload, 1500);
    return () => clearTimeout(timer);
  }, [pending, reports.data]);

  const siteList = sites.data ?? [];
  const siteName = (id: string) => siteList.find((s) => s.id === id)?.name ?? id;
  const siteZone = (id: string) => siteList.find((s) => s.id === id)?.timezone ?? 'UTC';

  return (
    <>
      <h1>Reports</h1>
      <ErrorBox error={sites.error} />
      {sites.loading && !sites.data && <Loading what="Loading the sites" />}
      {sites.data && siteList.length === 0 && (
        <p>
          Reports are made per site: <a href="/app/sites/new">add a site</a> first.
        </p>
      )}
      {siteList.length > 0 && <RequestForm sites={siteList} onRequested={reports.reload} />}

      <section aria-labelledby="recent-reports">
        <h2 id="recent-reports">Recent reports</h2>
        <ErrorBox error={reports.error} />
        {reports.loading && !reports.data && <Loading what="Loading the reports" />}
        {reports.data && list.length === 0 && <p class="muted">No reports yet.</p>}
        {list.length > 0 && (
          <ScrollTable label="Recent reports, newest first">
            <table class="list-on-phone">
              <caption class="visually-hidden">Recent reports, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Site</th>
                  <th scope="col">Report</th>
                  <th scope="col">Period</th>
                  <th scope="col">State</th>
                  <th scope="col">
                    <span class="visually-hidden">File</span>
                  </th>
                </tr>
              </thead>
              <tbody aria-live="polite">
                {list.map((r) => (
                  <tr key={r.id} data-report={r.id} data-state={r.state}>
                    <td data-label="Site">{siteName(r.site_id)}</td>
                    <td data-label="Report">
                      {templateText(r.template)}
                      <div class="muted small">{languageText(r.language)}</div>
                    </td>
                    <td data-label="Period" title={`${r.period.from} – ${r.period.to}`}>
                      {periodText(r.period, siteZone(r.site_id))}
                    </td>
                    <td data-label="State">
                      <span class={`badge report-${r.state}`}>{STATE_TEXT[r.state]}</span>
                      {r.error && <div class="muted small">{r.error}</div>}
                    </td>
                    <td>
                      {r.state === 'ready' ? (
                        <a
                          class="button"
                          href={`${API_BASE}/reports/${seg(r.id)}/file`}
                          download
                          title={r.sha256 ? `SHA-256 ${r.sha256}` : undefined}
                        >
                          Download PDF<span class="visually-hidden"> of {siteName(r.site_id)}</span> (
                          {bytes(r.size_bytes)})
                        </a>
                      ) : r.state === 'failed' ? null : (
                        <span class="muted">…</span>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </ScrollTable>
        )}
      </section>

      {siteList.length > 0 && <Schedules sites={siteList} siteName={siteName} siteZone={siteZone} />}
    </>
  );
}

function RequestForm({ sites, onRequested }: { sites: Site[]; onRequested: () => void }) {
  const [siteId, setSiteId] = useState('');
  const [template, setTemplate] = useState('haccp_monthly');
  const [month, setMonth] = useState(lastMonth());
  const [language, setLanguage] = useState('en');
  const [done, setDone] = useState(false);
  const chosen = sites.find((s) => s.id === siteId) ?? sites[0]!;

  const {
    busy,
    error,
    submit: request,
  } = useSubmit(async () => {
    setDone(false);
    const [y, m] = month.split('-').map(Number) as [number, number];
    if (!y || !m) throw new ApiError(0, 'client', 'Choose a month.');
    await api.post<Report>('/reports', {
      site_id: chosen.id,
      template,
      language,
      period: { from: monthStart(chosen.timezone, y, m), to: monthStart(chosen.timezone, y, m + 1) },
    });
    setDone(true);
    onRequested();
  });

  return (
    <form class="card" onSubmit={(e) => void request(e)} noValidate aria-labelledby="new-report">
      <h2 id="new-report">Request a report</h2>
      <div class="form-grid">
        <SelectField
          id="report-site"
          label="Site"
          error={error?.fieldMessage('site_id') ?? null}
          value={chosen.id}
          onChange={setSiteId}
          options={sites.map((s) => ({ value: s.id, text: s.name }))}
        />
        <SelectField
          id="report-template"
          label="Report"
          error={error?.fieldMessage('template') ?? null}
          value={template}
          onChange={setTemplate}
          options={TEMPLATES}
        />
        <Field
          id="report-month"
          label="Month"
          error={error?.fieldMessage('period') ?? null}
          hint={`Whole month in the site’s time (${chosen.timezone})`}
        >
          <input
            id="report-month"
            type="month"
            value={month}
            required
            aria-describedby="report-month-hint"
            onInput={(e) => setMonth(e.currentTarget.value)}
          />
        </Field>
        <SelectField
          id="report-language"
          label="Language"
          error={error?.fieldMessage('language') ?? null}
          value={language}
          onChange={setLanguage}
          options={LANGUAGES}
        />
      </div>
      {error && !['site_id', 'template', 'period', 'language'].some((f) => error.fieldMessage(f)) && (
        <ErrorBox error={error} />
      )}
      <button type="submit" class="primary" disabled={busy}>
        Request report
      </button>
      <p role="status" class="muted">
        {done ? 'Requested: it appears below and can be downloaded when it is ready.' : ''}
      </p>
    </form>
  );
}

/** The addresses typed in the recipients field, as the schedule is sent with them. */
function recipientList(text: string): string[] {
  return text
    .split(/[\s,;]+/)
    .map((r) => r.trim())
    .filter(Boolean);
}

/**
 * The recipients field's message, naming the address it is about: the cloud's details say
 * `recipients.2`, which a person knows as the address they typed third.
 */
function recipientsMessage(error: ApiError | null, typed: string[]): string | null {
  if (!error) return null;
  for (const d of error.namedDetails()) {
    const m = /^recipients\.(\d+)$/.exec(d.path);
    const address = m ? typed[Number(m[1])] : undefined;
    if (address !== undefined && typeof d.message === 'string') return `${address}: ${d.message}`;
  }
  return error.fieldMessage('recipients');
}

/** Report schedules: the list, create one, delete. */
function Schedules({
  sites,
  siteName,
  siteZone,
}: {
  sites: Site[];
  siteName: (id: string) => string;
  siteZone: (id: string) => string;
}) {
  const schedules = useLoad(() => all<Schedule>('/report-schedules'), []);
  const [siteId, setSiteId] = useState('');
  const [template, setTemplate] = useState('haccp_monthly');
  const [language, setLanguage] = useState('en');
  const [every, setEvery] = useState<'month' | 'week'>('month');
  const [recipients, setRecipients] = useState('');
  // The addresses as last sent: the cloud's details name them by their place in that list.
  const [sent, setSent] = useState<string[]>([]);
  const chosen = siteId || sites[0]!.id;

  const {
    busy,
    error,
    submit: create,
  } = useSubmit(async () => {
    const sentList = recipientList(recipients);
    setSent(sentList);
    await api.post<Schedule>('/report-schedules', {
      site_id: chosen,
      template,
      language,
      every,
      recipients: sentList,
    });
    setRecipients('');
    schedules.reload();
  });

  return (
    <section aria-labelledby="schedules-title">
      <h2 id="schedules-title">Report schedules</h2>
      <p class="muted">
        A schedule makes a site’s report after every month or week and e-mails the PDF to its recipients. An
        address that is not a user of this account first gets a mail asking it to confirm, and receives
        reports once it has; every report mail has a link that stops them.
      </p>
      <ErrorBox error={schedules.error} />
      {schedules.loading && !schedules.data && <Loading what="Loading the schedules" />}
      {schedules.data && schedules.data.length === 0 && <p class="muted">No schedules yet.</p>}
      {schedules.data && schedules.data.length > 0 && (
        <ScrollTable label="Report schedules">
          <table class="list-on-phone">
            <caption class="visually-hidden">Report schedules</caption>
            <thead>
              <tr>
                <th scope="col">Site</th>
                <th scope="col">Report</th>
                <th scope="col">Every</th>
                <th scope="col">Recipients</th>
                <th scope="col">Next</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {schedules.data.map((s) => (
                <tr key={s.id} data-schedule={s.id}>
                  <td data-label="Site">{siteName(s.site_id)}</td>
                  <td data-label="Report">
                    {templateText(s.template)}
                    <div class="muted small">{languageText(s.language)}</div>
                  </td>
                  <td data-label="Every">{s.every === 'month' ? 'Month' : 'Week'}</td>
                  <td data-label="Recipients" class="break">
                    <ul class="recipients" role="list">
                      {s.recipient_status.map((r) => (
                        <li key={r.address} data-status={r.status}>
                          {r.address}
                          {STATUS_TEXT[r.status] && (
                            <>
                              {' '}
                              <span class={`badge recipient-${r.status}`}>{STATUS_TEXT[r.status]}</span>
                            </>
                          )}
                        </li>
                      ))}
                    </ul>
                  </td>
                  <td data-label="Next">
                    {/* The period ends at midnight in the site's time: shown in that time. */}
                    <Time ts={s.next_run_at} timeZone={siteZone(s.site_id)} />
                  </td>
                  <td>
                    <ConfirmButton
                      label="Delete"
                      target={`schedule of ${siteName(s.site_id)}`}
                      question={<>Delete this schedule? No more reports are mailed for it.</>}
                      confirm="Yes, delete"
                      action={async () => {
                        await api.del(`/report-schedules/${seg(s.id)}`);
                        schedules.reload();
                      }}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </ScrollTable>
      )}
      <form class="card" onSubmit={(e) => void create(e)} noValidate aria-labelledby="new-schedule">
        <h3 id="new-schedule">New schedule</h3>
        <div class="form-grid">
          <SelectField
            id="schedule-site"
            label="Site"
            error={error?.fieldMessage('site_id') ?? null}
            value={chosen}
            onChange={setSiteId}
            options={sites.map((s) => ({ value: s.id, text: s.name }))}
          />
          <SelectField
            id="schedule-template"
            label="Report"
            error={error?.fieldMessage('template') ?? null}
            value={template}
            onChange={setTemplate}
            options={TEMPLATES}
          />
          <Field id="schedule-every" label="Every" error={error?.fieldMessage('every') ?? null}>
            <select
              id="schedule-every"
              value={every}
              onChange={(e) => setEvery(e.currentTarget.value as 'month' | 'week')}
            >
              <option value="month">Month (calendar month)</option>
              <option value="week">Week (Monday to Monday)</option>
            </select>
          </Field>
          <SelectField
            id="schedule-language"
            label="Language"
            error={error?.fieldMessage('language') ?? null}
            value={language}
            onChange={setLanguage}
            options={LANGUAGES}
          />
        </div>
        <Field
          id="schedule-recipients"
          label="Recipients"
          error={recipientsMessage(error, sent)}
          hint="E-mail addresses, separated by commas or spaces (up to 20). Addresses outside this account are asked to confirm first."
        >
          <input
            id="schedule-recipients"
            type="text"
            inputMode="email"
            value={recipients}
            onInput={(e) => setRecipients(e.currentTarget.value)}
          />
        </Field>
        {error &&
          !['site_id', 'template', 'every', 'language', 'recipients'].some((f) => error.fieldMessage(f)) && (
            <ErrorBox error={error} />
          )}
        <button type="submit" class="primary" disabled={busy}>
          Create schedule
        </button>
      </form>
    </section>
  );
}
