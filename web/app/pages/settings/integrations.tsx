import { useState } from 'preact/hooks';
import { all, api, seg } from '../../api.ts';
import { ConfirmButton, ScrollTable } from '../../components/actions.tsx';
import { SelectField, Ago, CopyValue, ErrorBox, Field, Loading, Time } from '../../components/ui.tsx';
import { useLoad, useSubmit } from '../../hooks.ts';
import type { Site } from '../../types.ts';

/** An integration as `GET /integrations` lists it; create and rotate add `token` and `url`, once. */
interface Integration {
  id: string;
  kind: string;
  site_id: string;
  name: string;
  /** Where the other side sends (for Shelly with a `<token>` placeholder outside create and rotate). */
  url: string;
  created_at: string;
  token_issued_at: string;
  last_used_at: string | null;
}
type WithSecret = Integration & { token: string; url: string };

/** The kinds, with where their URL goes on the other side. */
const KINDS = [
  {
    kind: 'chirpstack',
    label: 'ChirpStack',
    where:
      'In ChirpStack: Application → Integrations → HTTP. Event endpoint URL: the URL above; add the header Authorization with the value “Bearer ” followed by the token.',
  },
  {
    kind: 'ttn',
    label: 'The Things Stack (TTN)',
    where:
      'In The Things Stack: Integrations → Webhooks → Custom webhook. Base URL: the URL above; add the header Authorization with the value “Bearer ” followed by the token; enable uplink messages.',
  },
  {
    kind: 'shelly',
    label: 'Shelly (URL actions)',
    where:
      'On the Shelly device: the URL action (“report sensor values” URL) is the URL above, which carries the token.',
  },
];
const kindOf = (kind: string) => KINDS.find((k) => k.kind === kind);

/** The URL and token of an integration, shown once after create or rotate, with where they go. */
function Secret({ created, onDone, title }: { created: WithSecret; onDone: () => void; title: string }) {
  return (
    <div class="card once" role="status">
      <p>
        <strong>{title}</strong> Copy the URL and token now: the token is not shown again.
      </p>
      <CopyValue label="URL" value={created.url} />
      <CopyValue label="Token" value={created.token} />
      <p class="hint">{kindOf(created.kind)?.where}</p>
      <button type="button" onClick={onDone}>
        Done, hide it
      </button>
    </div>
  );
}

/** Integrations with LoRaWAN network servers and Shelly's cloud: create, list, rotate the token, delete. */
export function Integrations() {
  const data = useLoad(async () => {
    const [integrations, sites] = await Promise.all([all<Integration>('/integrations'), all<Site>('/sites')]);
    return { integrations, sites };
  }, []);
  const [kind, setKind] = useState('chirpstack');
  const [siteId, setSiteId] = useState('');
  const [name, setName] = useState('');
  const [secret, setSecret] = useState<{ item: WithSecret; title: string } | null>(null);
  const sites = data.data?.sites ?? [];
  const chosenSite = siteId || sites[0]?.id || '';
  const siteName = (id: string) => sites.find((s) => s.id === id)?.name ?? id;

  const {
    busy,
    error,
    submit: create,
  } = useSubmit(async () => {
    const item = await api.post<WithSecret>('/integrations', {
      kind,
      site_id: chosenSite,
      name: name.trim(),
    });
    setSecret({ item, title: `Integration “${item.name}” created.` });
    setName('');
    data.reload();
  });

  return (
    <section aria-labelledby="integrations-title">
      <h2 id="integrations-title">Integrations</h2>
      <p class="muted">
        Let ChirpStack, The Things Network or Shelly devices send to the cloud directly: each integration has
        a URL and a token; devices it reports land on its site.
      </p>
      {secret && <Secret created={secret.item} title={secret.title} onDone={() => setSecret(null)} />}
      <ErrorBox error={data.error} />
      {data.loading && !data.data && <Loading what="Loading the integrations" />}
      {data.data && sites.length === 0 && (
        <p>
          An integration belongs to a site: <a href="/app/sites/new">add a site</a> first.
        </p>
      )}
      {sites.length > 0 && (
        <form class="card" onSubmit={(e) => void create(e)} noValidate aria-labelledby="new-integration">
          <h3 id="new-integration">New integration</h3>
          <SelectField
            id="integration-kind"
            label="Kind"
            error={error?.fieldMessage('kind') ?? null}
            value={kind}
            onChange={setKind}
            options={KINDS.map((k) => ({ value: k.kind, text: k.label }))}
          />
          <SelectField
            id="integration-site"
            label="Site"
            error={error?.fieldMessage('site_id') ?? null}
            value={chosenSite}
            onChange={setSiteId}
            options={sites.map((s) => ({ value: s.id, text: s.name }))}
          />
          <Field id="integration-name" label="Name" error={error?.fieldMessage('name') ?? null}>
            <input
              id="integration-name"
              value={name}
              required
              onInput={(e) => setName(e.currentTarget.value)}
            />
          </Field>
          {error && !['kind', 'site_id', 'name'].some((f) => error.fieldMessage(f)) && (
            <ErrorBox error={error} />
          )}
          <button type="submit" class="primary" disabled={busy}>
            Create integration
          </button>
        </form>
      )}

      {data.data && (
        <>
          <h3>Integrations of this account</h3>
          {data.data.integrations.length === 0 ? (
            <p class="muted">No integrations yet.</p>
          ) : (
            <ScrollTable label="Integrations">
              <table class="list-on-phone">
                <caption class="visually-hidden">Integrations</caption>
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Kind</th>
                    <th scope="col">Site</th>
                    <th scope="col">
                      <span class="visually-hidden">Actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {data.data.integrations.map((i) => (
                    <tr key={i.id} data-integration={i.id}>
                      <td data-label="Name">
                        {i.name}
                        <div class="muted small">
                          token since <Time ts={i.token_issued_at} />, last used <Ago ts={i.last_used_at} />
                        </div>
                      </td>
                      <td data-label="Kind">{kindOf(i.kind)?.label ?? i.kind}</td>
                      <td data-label="Site">{siteName(i.site_id)}</td>
                      <td>
                        <div class="actions">
                          <ConfirmButton
                            label="Rotate token"
                            target={`of ${i.name}`}
                            question={
                              <>Make a new token for “{i.name}”? The old one stops working at once.</>
                            }
                            confirm="Yes, rotate"
                            action={async () => {
                              const item = await api.post<WithSecret>(
                                `/integrations/${seg(i.id)}/rotate-token`,
                              );
                              setSecret({ item: { ...i, ...item }, title: `New token for “${i.name}”.` });
                              data.reload();
                            }}
                          />
                          <ConfirmButton
                            label="Delete"
                            target={`integration ${i.name}`}
                            question={<>Delete “{i.name}”? Its URL stops accepting data.</>}
                            confirm="Yes, delete"
                            action={async () => {
                              await api.del(`/integrations/${seg(i.id)}`);
                              data.reload();
                            }}
                          />
                        </div>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </ScrollTable>
          )}
        </>
      )}
    </section>
  );
}
