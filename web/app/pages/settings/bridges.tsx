import { useState } from 'preact/hooks';
import { all, api, seg } from '../../api.ts';
import { ConfirmButton, saveFile, ScrollTable } from '../../components/actions.tsx';
import { SelectField, Ago, ErrorBox, Field, Loading, Time } from '../../components/ui.tsx';
import { useLoad, useSubmit } from '../../hooks.ts';
import type { Site } from '../../types.ts';

/** An MQTT bridge as `GET /bridges` lists it (docs/api/mqtt.md, "Bridge management"). */
interface Bridge {
  id: string;
  site_id: string;
  name: string;
  topic_root: string;
  mqtt_url: string;
  cert_serial: string;
  cert_fingerprint: string;
  expires_at: string;
  created_at: string;
  connected: boolean;
  last_seen_at: string | null;
}

/** The answer of `POST /bridges`: the bridge and its bundle; the private key appears only here. */
type CreatedBridge = Bridge & { cert_pem: string; key_pem: string; ca_pem: string };

/** The bundle's file name: the bridge's name, safe on every file system. */
function bundleName(b: Bridge): string {
  const slug =
    b.name
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-|-$/g, '') || 'bridge';
  return `bridge-${slug}.json`;
}

/**
 * MQTT bridges: create one for a site, download its bundle (made in the browser from the answer,
 * the one time the key exists outside the bridge), connected status, revoke.
 */
export function Bridges() {
  const data = useLoad(async () => {
    const [bridges, sites] = await Promise.all([all<Bridge>('/bridges'), all<Site>('/sites')]);
    return { bridges, sites };
  }, []);
  const [siteId, setSiteId] = useState('');
  const [name, setName] = useState('');
  const [created, setCreated] = useState<CreatedBridge | null>(null);
  const sites = data.data?.sites ?? [];
  const siteName = (id: string) => sites.find((s) => s.id === id)?.name ?? id;
  const chosenSite = siteId || sites[0]?.id || '';

  const {
    busy,
    error,
    submit: create,
  } = useSubmit(async () => {
    setCreated(await api.post<CreatedBridge>('/bridges', { site_id: chosenSite, name: name.trim() }));
    setName('');
    data.reload();
  });

  return (
    <section aria-labelledby="bridges-title">
      <h2 id="bridges-title">MQTT bridges</h2>
      <p class="muted">
        A bridge connects a gateway or your own MQTT broker to the cloud with a client certificate. Devices it
        reports land on its site.
      </p>
      {created && (
        <div class="card once" role="status">
          <p>
            <strong>Bridge “{created.name}” created.</strong> Download its bundle now: the private key is not
            shown again. The gateway reads the file as it is (<code>uplink.bundle</code> in gateway.yaml).
          </p>
          <button
            type="button"
            class="primary"
            onClick={() =>
              saveFile(
                new Blob([`${JSON.stringify(created, null, 2)}\n`], { type: 'application/json' }),
                bundleName(created),
              )
            }
          >
            Download the bundle ({bundleName(created)})
          </button>{' '}
          <button type="button" onClick={() => setCreated(null)}>
            Done, hide it
          </button>
          <p class="hint">
            Holds the client certificate, its private key, the service CA and the URL{' '}
            <code>{created.mqtt_url}</code>; topics under <code>{created.topic_root}</code>.
          </p>
        </div>
      )}
      <ErrorBox error={data.error} />
      {data.loading && !data.data && <Loading what="Loading the bridges" />}
      {data.data && sites.length === 0 && (
        <p>
          A bridge belongs to a site: <a href="/app/sites/new">add a site</a> first.
        </p>
      )}
      {sites.length > 0 && (
        <form class="card" onSubmit={(e) => void create(e)} noValidate aria-labelledby="new-bridge">
          <h3 id="new-bridge">New bridge</h3>
          <SelectField
            id="bridge-site"
            label="Site"
            error={error?.fieldMessage('site_id') ?? null}
            value={chosenSite}
            onChange={setSiteId}
            options={sites.map((s) => ({ value: s.id, text: s.name }))}
          />
          <Field
            id="bridge-name"
            label="Name"
            error={error?.fieldMessage('name') ?? null}
            hint="e.g. “Kitchen Pi”"
          >
            <input id="bridge-name" value={name} required onInput={(e) => setName(e.currentTarget.value)} />
          </Field>
          {error && !error.fieldMessage('name') && !error.fieldMessage('site_id') && (
            <ErrorBox error={error} />
          )}
          <button type="submit" class="primary" disabled={busy}>
            Create bridge
          </button>
        </form>
      )}

      {data.data && (
        <>
          <h3>Bridges of this account</h3>
          {data.data.bridges.length === 0 ? (
            <p class="muted">No bridges yet.</p>
          ) : (
            <ScrollTable label="MQTT bridges">
              <table class="list-on-phone">
                <caption class="visually-hidden">MQTT bridges</caption>
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Site</th>
                    <th scope="col">Connection</th>
                    <th scope="col">Certificate expires</th>
                    <th scope="col">
                      <span class="visually-hidden">Actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {data.data.bridges.map((b) => (
                    <tr key={b.id} data-bridge={b.id}>
                      <td data-label="Name">
                        {b.name}
                        <div class="muted small">
                          <code>{b.id}</code>
                        </div>
                      </td>
                      <td data-label="Site">{siteName(b.site_id)}</td>
                      <td data-label="Connection">
                        {b.connected ? (
                          <span class="badge state-ok">
                            <span aria-hidden="true">●</span> Connected
                          </span>
                        ) : (
                          <span class="badge conn-off">
                            <span aria-hidden="true">○</span> Not connected
                          </span>
                        )}
                        <div class="muted small">
                          last seen <Ago ts={b.last_seen_at} />
                        </div>
                      </td>
                      <td data-label="Certificate expires">
                        <Time ts={b.expires_at} />
                      </td>
                      <td>
                        <ConfirmButton
                          label="Revoke"
                          target={`bridge ${b.name}`}
                          question={
                            <>Revoke “{b.name}”? Its certificate stops working and it is disconnected.</>
                          }
                          confirm="Yes, revoke"
                          action={async () => {
                            await api.del(`/bridges/${seg(b.id)}`);
                            data.reload();
                          }}
                        />
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
