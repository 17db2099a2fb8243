import { ScrollTable } from '../../components/actions.tsx';
import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { api, ApiError, type Page } from '../../api.ts';
import { ErrorBox, Field, Loading, Time } from '../../components/ui.tsx';
import { useLoad } from '../../hooks.ts';
import { useSession } from '../../session.tsx';
import { AUDIT_KINDS } from '../../../../shared/audit-kinds.ts';

/** An audit log entry (docs/api/auth.md, "Account"). */
interface AuditEntry {
  id: string;
  ts: string;
  kind: string;
  by: string;
  target: string | null;
  details: unknown;
}

/** The kinds the cloud writes, offered as suggestions in alphabetical order (the filter takes any kind). */
const KINDS = [...AUDIT_KINDS].sort();

/** Entries per page: 50, or `?limit=` of the page's URL (1 to 500, as the API takes). */
function pageSize(query: Record<string, string>): number {
  const n = Number(query.limit);
  return Number.isInteger(n) && n >= 1 && n <= 500 ? n : 50;
}

/** A `datetime-local` value (the reader's local time) as an RFC 3339 instant, or undefined when empty. */
function instant(local: string): string | undefined {
  if (!local) return undefined;
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

interface Filter {
  kind: string;
  from: string;
  to: string;
}

/** The audit log, newest first: filter by kind and time, paged. */
export function AuditLog() {
  const size = pageSize(useLocation().query);
  const [draft, setDraft] = useState<Filter>({ kind: '', from: '', to: '' });
  const [filter, setFilter] = useState<Filter>(draft);
  // The cursors of the pages before the one shown, so "Newer" goes back.
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const cursor = cursors[cursors.length - 1] ?? null;

  const page = useLoad(() => {
    const q = new URLSearchParams({ limit: String(size) });
    if (filter.kind.trim()) q.set('kind', filter.kind.trim());
    const from = instant(filter.from);
    const to = instant(filter.to);
    if (from) q.set('from', from);
    if (to) q.set('to', to);
    if (cursor) q.set('cursor', cursor);
    return api.get<Page<AuditEntry>>(`/accounts/me/audit?${q.toString()}`);
  }, [filter, cursor, size]);
  const error: ApiError | null = page.error;
  // Entries name users by id; the account's users give their addresses.
  const { me } = useSession();
  const who = (id: string) => me?.users.find((u) => u.id === id)?.email ?? id;

  return (
    <section aria-labelledby="audit-title">
      <h2 id="audit-title">Audit log</h2>
      <p class="muted">
        Every change to the account, who made it and when. Entries are never changed or removed.
      </p>
      <form
        class="card filters"
        aria-label="Filter the audit log"
        onSubmit={(e) => {
          e.preventDefault();
          setFilter({ ...draft });
          setCursors([null]);
        }}
      >
        <Field
          id="audit-kind"
          label="Kind"
          error={error?.fieldMessage('kind') ?? null}
          hint="Empty: every kind"
        >
          <input
            id="audit-kind"
            list="audit-kinds"
            value={draft.kind}
            onInput={(e) => setDraft({ ...draft, kind: e.currentTarget.value })}
          />
          <datalist id="audit-kinds">
            {KINDS.map((k) => (
              <option key={k} value={k} />
            ))}
          </datalist>
        </Field>
        <Field id="audit-from" label="From (your time)" error={error?.fieldMessage('from') ?? null}>
          <input
            id="audit-from"
            type="datetime-local"
            value={draft.from}
            onInput={(e) => setDraft({ ...draft, from: e.currentTarget.value })}
          />
        </Field>
        <Field id="audit-to" label="Until (your time)" error={error?.fieldMessage('to') ?? null}>
          <input
            id="audit-to"
            type="datetime-local"
            value={draft.to}
            onInput={(e) => setDraft({ ...draft, to: e.currentTarget.value })}
          />
        </Field>
        <div class="filter-buttons">
          <button type="submit" class="primary">
            Show entries
          </button>{' '}
          <button
            type="button"
            onClick={() => {
              const none = { kind: '', from: '', to: '' };
              setDraft(none);
              setFilter(none);
              setCursors([null]);
            }}
          >
            Clear
          </button>
        </div>
      </form>

      {error && !['kind', 'from', 'to'].some((f) => error.fieldMessage(f)) && <ErrorBox error={error} />}
      {page.loading && !page.data && <Loading what="Loading the audit log" />}
      {page.data && page.data.data.length === 0 && <p class="muted">No entries match.</p>}
      {page.data && page.data.data.length > 0 && (
        <ScrollTable label="Audit log entries, newest first">
          <table class="audit list-on-phone">
            <caption class="visually-hidden">Audit log entries, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Kind</th>
                <th scope="col">By</th>
                <th scope="col">Target</th>
                <th scope="col">Details</th>
              </tr>
            </thead>
            <tbody>
              {page.data.data.map((a) => (
                <tr key={a.id} data-audit={a.kind}>
                  <td data-label="Time" class="nowrap">
                    <Time ts={a.ts} />
                  </td>
                  <td data-label="Kind">
                    <code>{a.kind}</code>
                  </td>
                  <td data-label="By">
                    <span title={a.by}>{who(a.by)}</span>
                  </td>
                  <td data-label="Target">
                    {a.target ? <code>{a.target}</code> : <span class="muted">–</span>}
                  </td>
                  <td data-label="Details">
                    <Details details={a.details} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </ScrollTable>
      )}
      <div class="pager">
        {cursors.length > 1 && (
          <button type="button" onClick={() => setCursors(cursors.slice(0, -1))}>
            Newer entries
          </button>
        )}
        {page.data?.has_more && (
          <button type="button" onClick={() => setCursors([...cursors, page.data?.next_cursor ?? null])}>
            Older entries
          </button>
        )}
      </div>
    </section>
  );
}

/** An entry's details: key and value pairs, values as compact JSON. */
function Details({ details }: { details: unknown }) {
  if (details === null || typeof details !== 'object') return <span class="muted">–</span>;
  const entries = Object.entries(details as Record<string, unknown>);
  if (entries.length === 0) return <span class="muted">–</span>;
  return (
    <dl class="details">
      {entries.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{typeof v === 'string' ? v : JSON.stringify(v)}</dd>
        </div>
      ))}
    </dl>
  );
}
