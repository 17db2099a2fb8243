import { useState } from 'preact/hooks';
import { all, api, seg } from '../../api.ts';
import { ConfirmButton, ScrollTable } from '../../components/actions.tsx';
import { SelectField, Ago, CopyValue, ErrorBox, Field, Loading, Time } from '../../components/ui.tsx';
import { useLoad, useSubmit } from '../../hooks.ts';

/** A user API token as `GET /tokens` lists it (docs/api/auth.md). */
interface Token {
  id: string;
  label: string;
  scope: 'read' | 'write' | 'admin';
  created_at: string;
  last_used_at: string | null;
  consider_rotating: boolean;
}

const SCOPES = [
  { value: 'read', text: 'read: reads only' },
  { value: 'write', text: 'write: reads and changes to sites, devices, sensors, alarms' },
  { value: 'admin', text: 'admin: everything, also tokens, bridges, webhooks and the export' },
];

/** API tokens: create with a scope (the token shown once), the list with last use, revoke. */
export function Tokens() {
  const tokens = useLoad(() => all<Token>('/tokens'), []);
  const [label, setLabel] = useState('');
  const [scope, setScope] = useState('read');
  const [created, setCreated] = useState<(Token & { token: string }) | null>(null);

  const {
    busy,
    error,
    submit: create,
  } = useSubmit(async () => {
    setCreated(await api.post<Token & { token: string }>('/tokens', { label: label.trim(), scope }));
    setLabel('');
    tokens.reload();
  });

  return (
    <section aria-labelledby="tokens-title">
      <h2 id="tokens-title">API tokens</h2>
      <p class="muted">
        Tokens let scripts and other systems use the API (<code>Authorization: Bearer …</code>). A token is
        shown once, when it is made.
      </p>
      {created && (
        <div class="card once" role="status">
          <p>
            <strong>
              Token “{created.label}” created ({created.scope}).
            </strong>{' '}
            Copy it now: it is not shown again.
          </p>
          <CopyValue label="Token" value={created.token} />
          <button type="button" onClick={() => setCreated(null)}>
            Done, hide it
          </button>
        </div>
      )}
      <form class="card" onSubmit={(e) => void create(e)} noValidate aria-labelledby="new-token">
        <h3 id="new-token">New token</h3>
        <Field
          id="token-label"
          label="Label"
          error={error?.fieldMessage('label') ?? null}
          hint="What uses it, e.g. “Grafana”"
        >
          <input id="token-label" value={label} required onInput={(e) => setLabel(e.currentTarget.value)} />
        </Field>
        <SelectField
          id="token-scope"
          label="Scope"
          error={error?.fieldMessage('scope') ?? null}
          value={scope}
          onChange={setScope}
          options={SCOPES}
        />
        {error && !error.fieldMessage('label') && !error.fieldMessage('scope') && <ErrorBox error={error} />}
        <button type="submit" class="primary" disabled={busy}>
          Create token
        </button>
      </form>

      <h3>Tokens of this account</h3>
      <ErrorBox error={tokens.error} />
      {tokens.loading && !tokens.data && <Loading what="Loading the tokens" />}
      {tokens.data && tokens.data.length === 0 && <p class="muted">No tokens yet.</p>}
      {tokens.data && tokens.data.length > 0 && (
        <ScrollTable label="API tokens">
          <table class="list-on-phone">
            <caption class="visually-hidden">API tokens</caption>
            <thead>
              <tr>
                <th scope="col">Label</th>
                <th scope="col">Scope</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {tokens.data.map((t) => (
                <tr key={t.id} data-token={t.id}>
                  <td data-label="Label">
                    {t.label}
                    {t.consider_rotating && (
                      <>
                        {' '}
                        <span class="badge warn" title="Older than 365 days: it keeps working">
                          <span aria-hidden="true">↻</span> consider rotating
                        </span>
                      </>
                    )}
                  </td>
                  <td data-label="Scope">{t.scope}</td>
                  <td data-label="Created">
                    <Time ts={t.created_at} />
                  </td>
                  <td data-label="Last used">
                    <Ago ts={t.last_used_at} />
                  </td>
                  <td>
                    <ConfirmButton
                      label="Revoke"
                      target={`token ${t.label}`}
                      question={<>Revoke “{t.label}”? Whatever uses it gets 401 from its next request on.</>}
                      confirm="Yes, revoke"
                      action={async () => {
                        await api.del(`/tokens/${seg(t.id)}`);
                        tokens.reload();
                      }}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </ScrollTable>
      )}
    </section>
  );
}
