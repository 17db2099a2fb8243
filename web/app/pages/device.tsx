import { useState } from 'preact/hooks';
import { useLocation, useRoute } from 'preact-iso';
import { all, api, ApiError, seg } from '../api.ts';
import { ShareOnMap } from './device-public.tsx';
import { DeviceCredentials, loadModels, type IssuedDevice, type Model } from '../components/device-setup.tsx';
import { Confirm } from '../components/confirm.tsx';
import { DeleteSection } from '../components/delete-section.tsx';
import { LiveStatus } from '../components/live-status.tsx';
import { Ago, ErrorBox, Field, LoadFailed, Loading, StateBadge, Time } from '../components/ui.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import { useLive, useLiveCopies, useNow } from '../live.ts';
import { useSession } from '../session.tsx';
import { sensorName } from '../site-helpers.ts';
import { deviceName, formatValue, type Device, type Sensor, type Site } from '../types.ts';
import { OnlineBadge } from './site.tsx';

async function loadDevice(id: string) {
  const [device, sensors, sites, models] = await Promise.all([
    api.get<Device>(`/devices/${seg(id)}`),
    api.get<{ data: Sensor[] }>(`/devices/${seg(id)}/sensors`).then((r) => r.data),
    all<Site>('/sites'),
    loadModels(),
  ]);
  return { device, sensors, sites, models };
}

/** `datetime-local` wants local wall time without a zone: the value for `d` in the browser's zone. */
function localInputValue(d: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function EditDevice({ device, onSaved }: { device: Device; onSaved: (d: Device) => void }) {
  const [name, setName] = useState(device.name ?? '');
  const [localId, setLocalId] = useState(device.local_id);
  const [notes, setNotes] = useState(device.notes ?? '');
  const [error, setError] = useState<ApiError | null>(null);
  const [saved, setSaved] = useState(false);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setSaved(false);
    try {
      onSaved(await api.patch<Device>(`/devices/${seg(device.id)}`, { name, local_id: localId, notes }));
      setSaved(true);
    } catch (err) {
      setError(err as ApiError);
    } finally {
      setBusy(false);
    }
  };
  const nameError = error?.fieldMessage('name') ?? null;
  const localIdError =
    error?.code === 'local_id_taken' ? error.message : (error?.fieldMessage('local_id') ?? null);
  const notesError = error?.fieldMessage('notes') ?? null;
  return (
    <section class="card" aria-labelledby="edit-head">
      <h2 id="edit-head">Name and notes</h2>
      <form onSubmit={(e) => void submit(e)} noValidate>
        <Field id="device-name" label="Name" error={nameError}>
          <input id="device-name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <Field
          id="device-local-id"
          label="Device ID"
          error={localIdError}
          hint="How the device names itself in its readings. Change it only if the device's own name changed."
        >
          <input
            id="device-local-id"
            value={localId}
            spellcheck={false}
            autocapitalize="off"
            onInput={(e) => setLocalId(e.currentTarget.value)}
          />
        </Field>
        <Field id="device-notes" label="Notes" error={notesError}>
          <textarea
            id="device-notes"
            rows={3}
            value={notes}
            onInput={(e) => setNotes(e.currentTarget.value)}
          />
        </Field>
        {error && !nameError && !localIdError && !notesError && <ErrorBox error={error} />}
        {saved && (
          <p class="success-box" role="status">
            Saved.
          </p>
        )}
        <button type="submit" class="primary" disabled={busy}>
          Save
        </button>
      </form>
    </section>
  );
}

function Identify({ device, model }: { device: Device; model: Model | undefined }) {
  const [result, setResult] = useState<string | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const identify = async () => {
    setBusy(true);
    setError(null);
    setResult(null);
    try {
      const { status } = await api.post<{ status: string }>(`/devices/${seg(device.id)}/identify`);
      setResult(
        status === 'sent'
          ? 'Sent: the device blinks for 30 seconds.'
          : status === 'unreachable'
            ? 'Not sent: no MQTT bridge of this site is connected right now.'
            : 'This model cannot blink on request.',
      );
    } catch (err) {
      setError(err as ApiError);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="card" aria-labelledby="identify-head">
      <h2 id="identify-head">Find it</h2>
      {model?.identify === false ? (
        <p class="muted">This model cannot blink on request.</p>
      ) : (
        <>
          <p>Makes the device blink for 30 seconds, through the MQTT bridge of its site.</p>
          <button type="button" disabled={busy} onClick={() => void identify()}>
            Identify
          </button>
        </>
      )}
      {result && (
        <p role="status" class="success-box">
          {result}
        </p>
      )}
      <ErrorBox error={error} />
    </section>
  );
}

function RotateToken({ device, accountId }: { device: Device; accountId: string }) {
  const [confirming, setConfirming] = useState(false);
  const [issued, setIssued] = useState<IssuedDevice | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const rotate = async () => {
    setBusy(true);
    setError(null);
    try {
      setIssued(await api.post<IssuedDevice>(`/devices/${seg(device.id)}/rotate-token`));
      setConfirming(false);
    } catch (err) {
      setError(err as ApiError);
    } finally {
      setBusy(false);
    }
  };
  if (issued) return <DeviceCredentials issued={issued} accountId={accountId} heading="New token" />;
  return (
    <section class="card" aria-labelledby="rotate-head">
      <h2 id="rotate-head">Token</h2>
      <p>
        A new token replaces the old one at once: the device stops being accepted until it has the new token
        (or, for Shelly URL models, the new URL).
      </p>
      <ErrorBox error={error} />
      {confirming ? (
        <Confirm
          question="Issue a new token? The old one stops working at once."
          yes="Yes, issue a new token"
          no="Cancel"
          busy={busy}
          onYes={() => void rotate()}
          onNo={() => setConfirming(false)}
        />
      ) : (
        <button type="button" onClick={() => setConfirming(true)}>
          Rotate token…
        </button>
      )}
    </section>
  );
}

function MoveDevice({
  device,
  sites,
  onMoved,
}: {
  device: Device;
  sites: Site[];
  onMoved: (d: Device) => void;
}) {
  const others = sites.filter((s) => s.id !== device.site_id);
  const [chosen, setTo] = useState(others[0]?.id ?? '');
  // After a move the list changes: the choice falls back to the first site still offered.
  const to = others.some((s) => s.id === chosen) ? chosen : (others[0]?.id ?? '');
  const [when, setWhen] = useState(localInputValue(new Date()));
  const [error, setError] = useState<ApiError | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  if (others.length === 0) {
    return (
      <section class="card" aria-labelledby="move-head">
        <h2 id="move-head">Move to another site</h2>
        <p class="muted">There is no other site to move it to.</p>
      </section>
    );
  }
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setDone(null);
    try {
      const at = new Date(when);
      const effective_at = Number.isNaN(at.getTime()) ? when : at.toISOString();
      const moved = await api.post<Device>(`/devices/${seg(device.id)}/move`, {
        to_site_id: to,
        effective_at,
      });
      const target = sites.find((s) => s.id === to)?.name ?? 'the other site';
      setDone(
        moved.site_id === to
          ? `Moved to ${target}.`
          : `The move to ${target} is planned for ${at.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' })}; readings from then on count there.`,
      );
      onMoved(moved);
    } catch (err) {
      setError(err as ApiError);
    } finally {
      setBusy(false);
    }
  };
  const whenError =
    error?.code === 'invalid_effective_at' ? error.message : (error?.fieldMessage('effective_at') ?? null);
  return (
    <section class="card" aria-labelledby="move-head">
      <h2 id="move-head">Move to another site</h2>
      <form onSubmit={(e) => void submit(e)} noValidate>
        <Field id="move-to" label="New site">
          <select id="move-to" value={to} onChange={(e) => setTo(e.currentTarget.value)}>
            {others.map((s) => (
              <option key={s.id} value={s.id}>
                {s.name}
              </option>
            ))}
          </select>
        </Field>
        <Field
          id="move-when"
          label="From (your local time)"
          error={whenError}
          hint="Readings taken from this moment on belong to the new site; earlier ones stay with the old one. A time in the future plans the move."
        >
          <input
            id="move-when"
            type="datetime-local"
            value={when}
            onInput={(e) => setWhen(e.currentTarget.value)}
          />
        </Field>
        {error && !whenError && <ErrorBox error={error} />}
        {done && (
          <p class="success-box" role="status">
            {done}
          </p>
        )}
        <button type="submit" disabled={busy}>
          Move device
        </button>
      </form>
    </section>
  );
}

function DeleteDevice({ device }: { device: Device }) {
  const { route } = useLocation();
  return (
    <DeleteSection
      id="delete-head"
      title="Delete the device"
      button="Delete device…"
      question={`Delete “${deviceName(device)}”? This cannot be undone.`}
      yes="Yes, delete the device"
      remove={async () => {
        await api.del(`/devices/${seg(device.id)}`);
        route(`/app/sites/${seg(device.site_id)}`);
      }}
    >
      <p>
        Its token stops working at once and it leaves the site. Its readings stay readable until the retention
        period ends.
      </p>
    </DeleteSection>
  );
}

/**
 * One device: its state and sensors (live), edit, identify, rotate token (shown once), move to
 * another site from a moment on, delete.
 */
export function DevicePage() {
  const { params } = useRoute();
  const id = params.id ?? '';
  const { me } = useSession();
  const loaded = useLoad(() => loadDevice(id), [id]);
  // The device and its sensors as they arrive live or from a save, laid over what was loaded.
  const deviceCopies = useLiveCopies<Device>();
  const setChanged = deviceCopies.put;
  const sensorCopies = useLiveCopies<Sensor>();
  const data = loaded.data;
  const now = useNow();
  const status = useLive((e) => {
    if (e.type === 'resync') {
      // The copies stay until the reload answers (they are newer than what is on screen).
      loaded.reload();
    } else if (e.type === 'device' && e.device.id === id) {
      setChanged(e.device);
    } else if (e.type === 'sensor' && e.sensor.device_id === id) {
      if (data?.sensors.some((s) => s.id === e.sensor.id)) sensorCopies.put(e.sensor);
      else loaded.reload();
    }
  });
  const device = data ? deviceCopies.get(data.device, loaded.loadedAt) : undefined;
  useTitle(device ? deviceName(device) : 'Device');

  if (loaded.error && !data) return <LoadFailed error={loaded.error} what="device" />;
  if (!data || !device) return <Loading what="Loading the device" />;
  const site = data.sites.find((s) => s.id === device.site_id);
  const sensors = sensorCopies
    .patched(data.sensors, loaded.loadedAt)
    .sort((a, b) => sensorName(a).localeCompare(sensorName(b)));
  const model = data.models.find((m) => m.model === device.model);

  return (
    <>
      <p class="breadcrumb">
        <a href="/app/">Overview</a> / {site && <a href={`/app/sites/${seg(site.id)}`}>{site.name}</a>} /
      </p>
      <div class="page-head">
        <h1>{deviceName(device)}</h1>
        <LiveStatus status={status} />
      </div>
      <dl class="facts">
        <dt>Status</dt>
        <dd>
          <OnlineBadge online={device.online} />
        </dd>
        <dt>Last seen</dt>
        <dd>
          <Ago ts={device.last_seen_at} now={now} />
        </dd>
        <dt>Device ID</dt>
        <dd>
          <code>{device.local_id}</code>
        </dd>
        <dt>Model</dt>
        <dd>
          {model?.name ?? device.model} <code class="muted small">{device.model}</code>
          {device.fw_version && <span class="muted"> · firmware {device.fw_version}</span>}
        </dd>
        <dt>Added</dt>
        <dd>
          <Time ts={device.created_at} />
        </dd>
        {device.notes && (
          <>
            <dt>Notes</dt>
            <dd>{device.notes}</dd>
          </>
        )}
      </dl>

      <div class="stack">
        <section aria-labelledby="sensors-head">
          <h2 id="sensors-head">Sensors</h2>
          {sensors.length === 0 ? (
            <p class="muted">No sensors yet: they appear with the device's first reading.</p>
          ) : (
            <div class="table-wrap">
              <table class="list-on-phone compact">
                <caption class="visually-hidden">Sensors of {deviceName(device)}</caption>
                <thead>
                  <tr>
                    <th scope="col">Sensor</th>
                    <th scope="col">Value</th>
                    <th scope="col">State</th>
                    <th scope="col">Updated</th>
                  </tr>
                </thead>
                <tbody>
                  {sensors.map((s) => (
                    <tr key={s.id} data-sensor={s.id}>
                      <td class="row-title">
                        <a href={`/app/sensors/${seg(s.id)}`}>{sensorName(s)}</a>
                      </td>
                      <td data-label="Value" class="value">
                        {formatValue(s.last_value, s.unit)}
                      </td>
                      <td data-label="State">
                        <StateBadge state={s.state} ruleEnabled={s.rule_enabled} />
                      </td>
                      <td data-label="Updated">
                        <Ago ts={s.last_ts} now={now} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </section>
        <div class="card-grid">
          <EditDevice key={device.id} device={device} onSaved={setChanged} />
          <div class="stack">
            <Identify device={device} model={model} />
            <RotateToken device={device} accountId={me?.id ?? '<account id>'} />
          </div>
          <ShareOnMap key={`public-${device.id}`} device={device} onSaved={setChanged} />
          <MoveDevice device={device} sites={data.sites} onMoved={setChanged} />
          <DeleteDevice device={device} />
        </div>
      </div>
    </>
  );
}
