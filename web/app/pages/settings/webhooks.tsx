import { useState } from 'preact/hooks';
import { all, api, seg, type Page } from '../../api.ts';
import { ConfirmButton, ScrollTable } from '../../components/actions.tsx';
import { CopyValue, ErrorBox, Field, Loading, Time } from '../../components/ui.tsx';
import { useLoad, useSubmit } from '../../hooks.ts';

/** An outbound webhook and its deliveries as the API shows them (docs/api/rules.md). */
interface Webhook {
  id: string;
  url: string;
  events: string[];
  created_at: string;
}
interface Delivery {
  id: string;
  type: string;
  state: string;
  created_at: string;
  attempts: {
    attempt: number;
    at: string;
    status: number | null;
    error: string | null;
    duration_ms: number | null;
  }[];
  next_attempt_at: string | null;
  delivered_at: string | null;
}

/** The event types a webhook can subscribe to, with what they announce. */
const EVENT_TYPES = [
  { type: 'alarm.opened', text: 'an alarm opens' },
  { type: 'alarm.resolved', text: 'an alarm ends' },
  { type: 'alarm.acknowledged', text: 'an alarm is acknowledged' },
  { type: 'device.offline', text: 'a device goes offline' },
  { type: 'device.online', text: 'a device comes online' },
  { type: 'report.ready', text: 'a report is ready' },
];

/** Webhooks: create (the signing secret shown once), the list, each one's deliveries, delete. */
export function Webhooks() {
  const hooks = useLoad(() => all<Webhook>('/webhooks'), []);
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<string[]>(['alarm.opened', 'alarm.resolved']);
  const [created, setCreated] = useState<(Webhook & { secret: string }) | null>(null);
  const [open, setOpen] = useState<string | null>(null);

  const {
    busy,
    error,
    submit: create,
  } = useSubmit(async () => {
    setCreated(await api.post<Webhook & { secret: string }>('/webhooks', { url: url.trim(), events }));
    setUrl('');
    hooks.reload();
  });
  const toggle = (type: string, on: boolean) =>
    setEvents((old) => (on ? [...old.filter((t) => t !== type), type] : old.filter((t) => t !== type)));
  const urlError =
    error?.fieldMessage('url') ?? (error?.code === 'invalid_webhook_url' ? error.message : null);
  const eventsError = error?.fieldMessage('events') ?? null;

  return (
    <section aria-labelledby="webhooks-title">
      <h2 id="webhooks-title">Webhooks</h2>
      <p class="muted">
        The cloud POSTs alarms, device status and finished reports to your URL, signed with the webhook’s
        secret (header <code>X-Service-Signature</code>), and retries for 24 hours until it answers 2xx.
      </p>
      {created && (
        <div class="card once" role="status">
          <p>
            <strong>Webhook created for {created.url}.</strong> Copy the signing secret now: it is not shown
            again.
          </p>
          <CopyValue label="Signing secret" value={created.secret} />
          <button type="button" onClick={() => setCreated(null)}>
            Done, hide it
          </button>
        </div>
      )}
      <form class="card" onSubmit={(e) => void create(e)} noValidate aria-labelledby="new-webhook">
        <h3 id="new-webhook">New webhook</h3>
        <Field id="webhook-url" label="URL" error={urlError} hint="https://… reachable from the internet">
          <input
            id="webhook-url"
            type="url"
            inputMode="url"
            value={url}
            required
            onInput={(e) => setUrl(e.currentTarget.value)}
          />
        </Field>
        <fieldset class={`field checks${eventsError ? ' has-error' : ''}`}>
          <legend>Events</legend>
          {EVENT_TYPES.map((t) => (
            <label key={t.type}>
              <input
                type="checkbox"
                checked={events.includes(t.type)}
                onChange={(e) => toggle(t.type, e.currentTarget.checked)}
              />
              <span>
                <code>{t.type}</code> <span class="muted">{t.text}</span>
              </span>
            </label>
          ))}
          {eventsError && (
            <p class="field-error" role="alert">
              {eventsError}
            </p>
          )}
        </fieldset>
        {error && !urlError && !eventsError && <ErrorBox error={error} />}
        <button type="submit" class="primary" disabled={busy}>
          Create webhook
        </button>
      </form>

      <h3>Webhooks of this account</h3>
      <ErrorBox error={hooks.error} />
      {hooks.loading && !hooks.data && <Loading what="Loading the webhooks" />}
      {hooks.data && hooks.data.length === 0 && <p class="muted">No webhooks yet.</p>}
      {hooks.data?.map((w) => (
        <article class="card item" key={w.id} data-webhook={w.id} aria-labelledby={`wh-${w.id}`}>
          <h4 id={`wh-${w.id}`} class="break">
            {w.url}
          </h4>
          <p class="muted">
            {w.events.join(', ')} · created <Time ts={w.created_at} />
          </p>
          <div class="actions">
            <button
              type="button"
              aria-expanded={open === w.id}
              aria-controls={`deliveries-${w.id}`}
              onClick={() => setOpen(open === w.id ? null : w.id)}
            >
              {open === w.id ? 'Hide deliveries' : 'Show deliveries'}
            </button>
            <ConfirmButton
              label="Delete"
              target={`webhook ${w.url}`}
              question={<>Delete this webhook? Deliveries not made yet are cancelled.</>}
              confirm="Yes, delete"
              action={async () => {
                await api.del(`/webhooks/${seg(w.id)}`);
                if (open === w.id) setOpen(null);
                hooks.reload();
              }}
            />
          </div>
          {open === w.id && (
            <div id={`deliveries-${w.id}`}>
              <Deliveries webhookId={w.id} />
            </div>
          )}
        </article>
      ))}
    </section>
  );
}

/** One webhook's deliveries, newest first, each with every attempt; more on request. */
function Deliveries({ webhookId }: { webhookId: string }) {
  const [cursor, setCursor] = useState<string | null>(null);
  const [shown, setShown] = useState<Delivery[]>([]);
  const page = useLoad(async () => {
    const q = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
    const p = await api.get<Page<Delivery>>(`/webhooks/${seg(webhookId)}/deliveries?limit=20${q}`);
    setShown((old) => (cursor ? [...old, ...p.data] : p.data));
    return p;
  }, [webhookId, cursor]);
  return (
    <>
      <ErrorBox error={page.error} />
      {page.loading && shown.length === 0 && <Loading what="Loading the deliveries" />}
      {!page.loading && shown.length === 0 && !page.error && <p class="muted">Nothing delivered yet.</p>}
      {shown.length > 0 && (
        <ScrollTable label="Deliveries">
          <table class="list-on-phone">
            <caption class="visually-hidden">Deliveries</caption>
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">State</th>
                <th scope="col">Attempts</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((d) => (
                <tr key={d.id}>
                  <td data-label="Event">
                    <code>{d.type}</code>
                    <div class="muted small">
                      <Time ts={d.created_at} />
                    </div>
                  </td>
                  <td data-label="State">
                    {d.state}
                    {d.next_attempt_at && d.state !== 'delivered' && (
                      <div class="muted small">
                        next try <Time ts={d.next_attempt_at} />
                      </div>
                    )}
                  </td>
                  <td data-label="Attempts">
                    {d.attempts.length === 0 ? (
                      <span class="muted">none yet</span>
                    ) : (
                      <ol class="attempts">
                        {d.attempts.map((a) => (
                          <li key={a.attempt}>
                            <Time ts={a.at} />: {a.status !== null ? `HTTP ${a.status}` : 'no answer'}
                            {a.error ? ` (${a.error})` : ''}
                            {a.duration_ms !== null ? `, ${a.duration_ms} ms` : ''}
                          </li>
                        ))}
                      </ol>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </ScrollTable>
      )}
      {page.data?.has_more && (
        <button
          type="button"
          disabled={page.loading}
          onClick={() => setCursor(page.data?.next_cursor ?? null)}
        >
          Older deliveries
        </button>
      )}
    </>
  );
}
