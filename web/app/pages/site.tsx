import { useState } from 'preact/hooks';
import { useLocation, useRoute } from 'preact-iso';
import { all, api, ApiError, seg } from '../api.ts';
import { DeleteSection } from '../components/delete-section.tsx';
import { LiveStatus } from '../components/live-status.tsx';
import { Ago, ErrorBox, Field, LoadFailed, Loading, SeverityBadge, StateBadge } from '../components/ui.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import { useLive, useLiveCopies, useNow } from '../live.ts';
import { HEALTH_KINDS, sensorName, verticalLabel } from '../site-helpers.ts';
import { deviceName, formatValue, type Device, type Sensor, type Site } from '../types.ts';
import { loadModels, modelName } from '../components/device-setup.tsx';
import { TimeZoneSelect } from './site-new.tsx';

async function loadSite(id: string) {
  const [site, devices, models] = await Promise.all([
    api.get<Site>(`/sites/${seg(id)}`),
    all<Device>(`/devices?site_id=${seg(id)}`),
    loadModels(),
  ]);
  const sensors = (
    await Promise.all(
      devices.map(async (d) => (await api.get<{ data: Sensor[] }>(`/devices/${seg(d.id)}/sensors`)).data),
    )
  ).flat();
  return { site, devices, sensors, models };
}

/** "Online" / "Offline" with a shape, never colour alone. */
export function OnlineBadge({ online }: { online: boolean }) {
  return online ? (
    <span class="online">
      <span aria-hidden="true">●</span> Online
    </span>
  ) : (
    <span class="offline">
      <span aria-hidden="true">○</span> Offline
    </span>
  );
}

/** A health sensor's value, with its state while it needs attention (a low battery in alarm says so). */
function Health({ sensor }: { sensor: Sensor | undefined }) {
  if (!sensor) return <span class="muted">–</span>;
  return (
    <>
      {formatValue(sensor.last_value, sensor.unit)}
      {(sensor.state === 'alarm' || sensor.state === 'grace') && (
        <>
          {' '}
          <StateBadge state={sensor.state} ruleEnabled={sensor.rule_enabled} />
        </>
      )}
      {sensor.alert_severity && (
        <>
          {' '}
          <SeverityBadge severity={sensor.alert_severity} />
        </>
      )}
    </>
  );
}

/** Rename the site and change its time zone (the vertical is fixed at creation). */
function SiteSettings({ site, onSaved }: { site: Site; onSaved: (s: Site) => void }) {
  const [name, setName] = useState(site.name);
  const [timezone, setTimezone] = useState(site.timezone);
  const [error, setError] = useState<ApiError | null>(null);
  const [saved, setSaved] = useState(false);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setSaved(false);
    try {
      onSaved(await api.patch<Site>(`/sites/${seg(site.id)}`, { name, timezone }));
      setSaved(true);
    } catch (err) {
      setError(err as ApiError);
    } finally {
      setBusy(false);
    }
  };
  const nameError = error?.fieldMessage('name') ?? null;
  const zoneError = error?.fieldMessage('timezone') ?? null;
  return (
    <section class="card" aria-labelledby="site-settings">
      <h2 id="site-settings">Name and time zone</h2>
      <form onSubmit={(e) => void submit(e)} noValidate>
        <Field id="site-name" label="Name" error={nameError}>
          <input id="site-name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <Field id="site-timezone" label="Time zone" error={zoneError} hint="Reports show times in it.">
          <TimeZoneSelect id="site-timezone" value={timezone} onChange={setTimezone} />
        </Field>
        {error && !nameError && !zoneError && <ErrorBox error={error} />}
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

/**
 * Delete with a confirmation, offered once the site has no devices; the cloud's refusal (a device
 * scheduled to move here) is shown as it says it.
 */
function DeleteSite({ site, devices }: { site: Site; devices: number }) {
  const { route } = useLocation();
  if (devices > 0)
    return (
      <section class="card danger-zone" aria-labelledby="delete-site">
        <h2 id="delete-site">Delete the site</h2>
        <p>
          It still has {devices === 1 ? '1 device' : `${devices} devices`}. Move each to another site or
          delete it, on the device’s page; then the site can be deleted.
        </p>
      </section>
    );
  return (
    <DeleteSection
      id="delete-site"
      title="Delete the site"
      button="Delete site…"
      question={`Delete “${site.name}”? This cannot be undone.`}
      yes="Yes, delete the site"
      closeOnError
      remove={async () => {
        await api.del(`/sites/${seg(site.id)}`);
        route('/app/');
      }}
    >
      <p>It has no devices. The readings of devices it had stay readable until the retention period ends.</p>
    </DeleteSection>
  );
}

/**
 * One site: its devices (online, last seen, battery, signal) and its sensors with their current
 * value and state, updating live; rename, time zone, delete.
 */
export function SitePage() {
  const { params } = useRoute();
  const id = params.id ?? '';
  const loaded = useLoad(() => loadSite(id), [id]);
  const [renamed, setRenamed] = useState<Site | null>(null);
  const sensorCopies = useLiveCopies<Sensor>();
  const deviceCopies = useLiveCopies<Device>();
  const data = loaded.data;
  const now = useNow();
  const status = useLive((e) => {
    if (e.type === 'resync') {
      // The live copies stay until the reload answers (they are newer than what is on screen).
      loaded.reload();
    } else if (e.type === 'sensor') {
      if (!data) return;
      if (data.sensors.some((s) => s.id === e.sensor.id)) sensorCopies.put(e.sensor);
      else if (data.devices.some((d) => d.id === e.sensor.device_id)) loaded.reload();
    } else if (e.type === 'device') {
      if (!data) return;
      if (data.devices.some((d) => d.id === e.device.id)) deviceCopies.put(e.device);
      else if (e.device.site_id === id) loaded.reload();
    }
  });
  const site = renamed?.id === id ? renamed : data?.site;
  useTitle(site?.name ?? 'Site');

  if (loaded.error && !data) return <LoadFailed error={loaded.error} what="site" />;
  if (!data || !site) return <Loading what="Loading the site" />;

  const devices = deviceCopies.patched(data.devices, loaded.loadedAt).filter((d) => d.site_id === id);
  const sensors = sensorCopies.patched(data.sensors, loaded.loadedAt);
  const deviceById = new Map(devices.map((d) => [d.id, d]));
  const health = (d: Device, kind: string) => sensors.find((s) => s.device_id === d.id && s.kind === kind);
  const placeSensors = sensors
    .filter((s) => !HEALTH_KINDS.has(s.kind) && deviceById.has(s.device_id))
    .sort(
      (a, b) =>
        deviceName(deviceById.get(a.device_id)!).localeCompare(deviceName(deviceById.get(b.device_id)!)) ||
        sensorName(a).localeCompare(sensorName(b)),
    );

  return (
    <>
      <p class="breadcrumb">
        <a href="/app/">Overview</a> /
      </p>
      <div class="page-head">
        <h1>{site.name}</h1>
        <div class="head-actions">
          <LiveStatus status={status} />
          <a class="button primary" href={`/app/sites/${seg(id)}/devices/new`}>
            Add a device
          </a>
        </div>
      </div>
      <dl class="facts">
        <dt>Kind</dt>
        <dd>{verticalLabel(site.vertical)}</dd>
        <dt>Time zone</dt>
        <dd>{site.timezone}</dd>
      </dl>

      <div class="stack">
        <section aria-labelledby="sensors-head">
          <h2 id="sensors-head">Sensors</h2>
          {placeSensors.length === 0 ? (
            <p class="muted">
              No sensors yet. A device's sensors appear with its first reading
              {devices.length === 0 && (
                <>
                  : <a href={`/app/sites/${seg(id)}/devices/new`}>add a device</a>
                </>
              )}
              .
            </p>
          ) : (
            <div class="table-wrap">
              <table class="list-on-phone compact">
                <caption class="visually-hidden">Sensors of {site.name}</caption>
                <thead>
                  <tr>
                    <th scope="col">Sensor</th>
                    <th scope="col">Device</th>
                    <th scope="col">Value</th>
                    <th scope="col">State</th>
                    <th scope="col">Updated</th>
                  </tr>
                </thead>
                <tbody>
                  {placeSensors.map((s) => (
                    <tr key={s.id} data-sensor={s.id}>
                      <td class="row-title">
                        <a href={`/app/sensors/${seg(s.id)}`}>{sensorName(s)}</a>
                      </td>
                      <td data-label="Device">{deviceName(deviceById.get(s.device_id)!)}</td>
                      <td data-label="Value" class="value">
                        {formatValue(s.last_value, s.unit)}
                      </td>
                      <td data-label="State">
                        <StateBadge state={s.state} ruleEnabled={s.rule_enabled} />{' '}
                        <SeverityBadge severity={s.alert_severity} />
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

        <section aria-labelledby="devices-head">
          <div class="section-head">
            <h2 id="devices-head">Devices</h2>
          </div>
          {devices.length === 0 ? (
            <p class="muted">
              No devices on this site. <a href={`/app/sites/${seg(id)}/devices/new`}>Add a device</a>.
            </p>
          ) : (
            <div class="table-wrap">
              <table class="list-on-phone compact">
                <caption class="visually-hidden">Devices of {site.name}</caption>
                <thead>
                  <tr>
                    <th scope="col">Device</th>
                    <th scope="col">Status</th>
                    <th scope="col">Last seen</th>
                    <th scope="col">Battery</th>
                    <th scope="col">Signal</th>
                    <th scope="col">Model</th>
                  </tr>
                </thead>
                <tbody>
                  {devices.map((d) => (
                    <tr key={d.id} data-device={d.id}>
                      <td class="row-title">
                        <a href={`/app/devices/${seg(d.id)}`}>{deviceName(d)}</a>
                      </td>
                      <td data-label="Status">
                        <OnlineBadge online={d.online} />
                      </td>
                      <td data-label="Last seen">
                        <Ago ts={d.last_seen_at} now={now} />
                      </td>
                      <td data-label="Battery" class="value">
                        <Health sensor={health(d, 'battery')} />
                      </td>
                      <td data-label="Signal" class="value">
                        <Health sensor={health(d, 'signal')} />
                      </td>
                      <td data-label="Model">{modelName(data.models, d.model)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </section>

        <div class="card-grid">
          <SiteSettings key={site.id} site={site} onSaved={setRenamed} />
          <DeleteSite site={site} devices={devices.length} />
        </div>
      </div>
    </>
  );
}
