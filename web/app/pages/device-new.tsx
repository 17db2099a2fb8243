import { useState } from 'preact/hooks';
import { useRoute } from 'preact-iso';
import { api, ApiError, seg } from '../api.ts';
import {
  DeviceCredentials,
  INGEST_KINDS,
  loadModels,
  type IssuedDevice,
} from '../components/device-setup.tsx';
import { ErrorBox, Field, Loading } from '../components/ui.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import { useSession } from '../session.tsx';
import type { Site } from '../types.ts';

/** The hint for the device ID, by how the model reaches the cloud. */
const LOCAL_ID_HINTS: Record<string, string> = {
  shelly_get: 'Any name without spaces, e.g. fridge-1; it goes into the device’s URL.',
  https_post: 'The name the device sends as "device", e.g. its serial number. No spaces.',
  mqtt: 'The device’s MQTT name: for a Shelly its topic prefix (shellyplusht-08b61fcb7f3c). No spaces.',
  lorawan: 'The sensor’s DevEUI in lower-case hex, e.g. a84041000181c8f1.',
};

/**
 * Add a device to a site: the model (from `GET /models`), its device ID, name and notes; afterwards
 * its token and ingest URL, shown once, with the steps for its model.
 */
export function DeviceNew() {
  const { params } = useRoute();
  const siteId = params.id ?? '';
  const { me } = useSession();
  const loaded = useLoad(() => Promise.all([api.get<Site>(`/sites/${seg(siteId)}`), loadModels()]), [siteId]);
  const [model, setModel] = useState('');
  const [localId, setLocalId] = useState('');
  const [name, setName] = useState('');
  const [notes, setNotes] = useState('');
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const [issued, setIssued] = useState<IssuedDevice | null>(null);
  useTitle(issued ? 'Device added' : 'Add a device');

  if (loaded.error) return <ErrorBox error={loaded.error} />;
  if (!loaded.data) return <Loading what="Loading the models" />;
  const [site, models] = loaded.data;
  const chosen = models.find((m) => m.model === model);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body: Record<string, string> = { site_id: siteId, local_id: localId, name, model };
      if (notes) body.notes = notes;
      setIssued(await api.post<IssuedDevice>('/devices', body));
    } catch (err) {
      setError(err as ApiError);
    } finally {
      setBusy(false);
    }
  };

  const breadcrumb = (
    <p class="breadcrumb">
      <a href="/app/">Overview</a> / <a href={`/app/sites/${seg(siteId)}`}>{site.name}</a> /
    </p>
  );

  if (issued) {
    return (
      <>
        {breadcrumb}
        <h1>Device added: {issued.name || issued.local_id}</h1>
        <DeviceCredentials issued={issued} accountId={me?.id ?? '<account id>'} heading="Token and URL" />
        <div class="row-actions" style={{ marginTop: '1rem' }}>
          <a class="button primary" href={`/app/sites/${seg(siteId)}`}>
            Done: back to {site.name}
          </a>
          <a class="button" href={`/app/devices/${seg(issued.id)}`}>
            Open the device
          </a>
        </div>
      </>
    );
  }

  const modelError = error?.code === 'unknown_model' ? error.message : error?.fieldMessage('model');
  const localIdError =
    error?.code === 'local_id_taken' ? error.message : (error?.fieldMessage('local_id') ?? null);
  const nameError = error?.fieldMessage('name') ?? null;
  const notesError = error?.fieldMessage('notes') ?? null;
  const shownElsewhere = modelError || localIdError || nameError || notesError;
  const kinds = [...new Set(models.map((m) => m.ingest_url_kind))];

  return (
    <>
      {breadcrumb}
      <h1>Add a device to {site.name}</h1>
      <form onSubmit={(e) => void submit(e)} noValidate class="wide-form">
        <fieldset class="model-list" aria-describedby={modelError ? 'model-error' : undefined}>
          <legend>Model</legend>
          {kinds.map((kind) => (
            <div key={kind}>
              <h2 class="model-group">{INGEST_KINDS[kind] ?? kind}</h2>
              <div class="model-options">
                {models
                  .filter((m) => m.ingest_url_kind === kind)
                  .map((m) => (
                    <label key={m.model}>
                      <input
                        type="radio"
                        name="model"
                        value={m.model}
                        checked={model === m.model}
                        onChange={() => setModel(m.model)}
                      />
                      <span>
                        <strong>{m.name}</strong>
                        <br />
                        <span class="muted small">
                          {m.vendor} · <code>{m.model}</code>
                        </span>
                      </span>
                    </label>
                  ))}
              </div>
            </div>
          ))}
          {modelError && (
            <p class="field-error" id="model-error" role="alert">
              {modelError}
            </p>
          )}
        </fieldset>
        <Field
          id="device-local-id"
          label="Device ID"
          error={localIdError}
          hint={
            (chosen && LOCAL_ID_HINTS[chosen.ingest_url_kind]) ??
            'How the device names itself, e.g. its serial number. No spaces.'
          }
        >
          <input
            id="device-local-id"
            value={localId}
            autocapitalize="off"
            spellcheck={false}
            onInput={(e) => setLocalId(e.currentTarget.value)}
          />
        </Field>
        <Field
          id="device-name"
          label="Name"
          error={nameError}
          hint="What people call it, e.g. Walk-in fridge."
        >
          <input id="device-name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <Field id="device-notes" label="Notes (optional)" error={notesError}>
          <textarea
            id="device-notes"
            rows={3}
            value={notes}
            onInput={(e) => setNotes(e.currentTarget.value)}
          />
        </Field>
        {error && !shownElsewhere && <ErrorBox error={error} />}
        <div class="row-actions">
          <button type="submit" class="primary" disabled={busy}>
            Add device
          </button>
          <a class="button" href={`/app/sites/${seg(siteId)}`}>
            Cancel
          </a>
        </div>
      </form>
    </>
  );
}
