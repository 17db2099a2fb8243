import { all, api, seg } from '../api.ts';
import { alarmTitle } from '../components/alarm-bits.tsx';
import { LiveStatus } from '../components/live-status.tsx';
import { Ago, ErrorBox, Loading, SeverityBadge, StateBadge, stateLook, Time } from '../components/ui.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import { useLive, useLiveCopies, useNow } from '../live.ts';
import { HEALTH_KINDS, sensorName } from '../site-helpers.ts';
import { deviceName, formatValue, type AlarmEvent, type Device, type Sensor, type Site } from '../types.ts';

/** The order of attention: a site or sensor in alarm comes before one in grace, and so on. */
const URGENCY: Record<string, number> = { alarm: 0, grace: 1, no_data: 2, silent: 3, ok: 4 };
const urgency = (state: string) => URGENCY[state] ?? 9;
/** A sensor whose rule is off (no bounds: a humidity kept for the record) comes after the judged ones. */
const sensorUrgency = (s: Sensor) => (s.state === 'silent' && !s.rule_enabled ? 5 : urgency(s.state));

/**
 * What the overview lists: the sensors of the place (temperature, humidity...), and a device's
 * battery or signal only while it needs attention (the site page shows them always).
 */
const shownHere = (s: Sensor) => !HEALTH_KINDS.has(s.kind) || s.state === 'alarm' || s.state === 'grace';

interface Loaded {
  sites: Site[];
  devices: Device[];
  sensors: Sensor[];
}

/** Every site, its devices and their sensors (a few requests per site: accounts have few sites). */
async function loadSites(): Promise<Loaded> {
  const sites = await all<Site>('/sites');
  const devices = (await Promise.all(sites.map((s) => all<Device>(`/devices?site_id=${seg(s.id)}`)))).flat();
  const sensors = (
    await Promise.all(
      devices.map(async (d) => (await api.get<{ data: Sensor[] }>(`/devices/${seg(d.id)}/sensors`)).data),
    )
  ).flat();
  return { sites, devices, sensors };
}

const loadOpenAlarms = async () =>
  (await api.get<{ data: AlarmEvent[] }>('/events?state=open&limit=100')).data;

/** "2 alarm · 5 ok" as badges, most urgent first, labelled as the sensors' own badges are. */
function StateCounts({ sensors }: { sensors: Sensor[] }) {
  const counts = new Map<string, { state: string; ruleEnabled: boolean; n: number }>();
  for (const s of sensors) {
    const ruleOff = s.state === 'silent' && !s.rule_enabled;
    const key = ruleOff ? 'rule_off' : s.state;
    const c = counts.get(key) ?? { state: s.state, ruleEnabled: !ruleOff, n: 0 };
    counts.set(key, { ...c, n: c.n + 1 });
  }
  if (counts.size === 0)
    return <p class="muted">No sensors yet: they appear with a device's first reading.</p>;
  return (
    <ul class="state-counts" aria-label="Sensors by state">
      {[...counts]
        .sort(
          ([, a], [, b]) => (a.ruleEnabled ? urgency(a.state) : 5) - (b.ruleEnabled ? urgency(b.state) : 5),
        )
        .map(([key, c]) => {
          const look = stateLook(c.state, c.ruleEnabled);
          return (
            <li key={key}>
              <span class={`badge state-${c.state}`}>
                <span aria-hidden="true">{look.shape}</span> {c.n} {look.label}
              </span>
            </li>
          );
        })}
    </ul>
  );
}

/**
 * Every site with its sensors' states at a glance, sites and sensors in alarm first, and the open
 * alarms above them. Values, states and alarms update live from the stream; a sensor or device
 * the page has not seen (a new channel's first reading) loads the sites again.
 */
export function Overview() {
  useTitle('Overview');
  const sites = useLoad(loadSites, []);
  const alarms = useLoad(loadOpenAlarms, []);
  const sensorCopies = useLiveCopies<Sensor>();
  const deviceCopies = useLiveCopies<Device>();
  const now = useNow();
  const status = useLive((e) => {
    if (e.type === 'resync') {
      // The live copies stay until the reload answers (they are newer than what is on screen).
      sites.reload();
      alarms.reload();
    } else if (e.type === 'sensor') {
      sensorCopies.put(e.sensor);
      if (sites.data && !sites.data.sensors.some((s) => s.id === e.sensor.id)) sites.reload();
    } else if (e.type === 'device') {
      deviceCopies.put(e.device);
      if (sites.data && !sites.data.devices.some((d) => d.id === e.device.id)) sites.reload();
    } else if (e.type === 'alarm') {
      alarms.reload();
    }
  });

  const data = sites.data;
  const devices = new Map(
    (data ? deviceCopies.patched(data.devices, sites.loadedAt) : []).map((d) => [d.id, d]),
  );
  const sensors = data ? sensorCopies.patched(data.sensors, sites.loadedAt) : [];
  const sensorById = new Map(sensors.map((s) => [s.id, s]));
  const views = (data?.sites ?? []).map((site) => {
    const rows = sensors
      .filter((s) => devices.get(s.device_id)?.site_id === site.id && shownHere(s))
      .sort((a, b) => sensorUrgency(a) - sensorUrgency(b) || sensorName(a).localeCompare(sensorName(b)));
    const offline = [...devices.values()].filter((d) => d.site_id === site.id && !d.online).length;
    const deviceCount = [...devices.values()].filter((d) => d.site_id === site.id).length;
    return { site, rows, offline, deviceCount, worst: Math.min(9, ...rows.map(sensorUrgency)) };
  });
  views.sort((a, b) => a.worst - b.worst || a.site.name.localeCompare(b.site.name));
  const siteName = new Map((data?.sites ?? []).map((s) => [s.id, s.name]));
  const open = [...(alarms.data ?? [])].sort((a, b) => b.started_at.localeCompare(a.started_at));

  return (
    <>
      <div class="page-head">
        <h1>Overview</h1>
        <div class="head-actions">
          <LiveStatus status={status} />
          <a class="button primary" href="/app/sites/new">
            Add a site
          </a>
        </div>
      </div>
      <ErrorBox error={sites.error ?? alarms.error} />
      {sites.loading && !data && <Loading />}
      {open.length > 0 && (
        <section aria-labelledby="open-alarms" class="open-alarms">
          <h2 id="open-alarms">Open alarms ({open.length})</h2>
          <ul class="alarm-list">
            {open.map((e) => {
              const sensor = sensorById.get(e.sensor_id);
              const device = sensor ? devices.get(sensor.device_id) : undefined;
              return (
                <li key={e.id} class="alarm-item">
                  <StateBadge state={e.silenced ? 'silent' : 'alarm'} />{' '}
                  <a href={`/app/events/${seg(e.id)}`}>
                    {siteName.get(e.site_id) ?? 'A site'}
                    {device && ` · ${deviceName(device)}`}
                    {sensor && ` · ${sensorName(sensor)}`}
                  </a>{' '}
                  <span>{alarmTitle(e, sensor?.unit)}</span>
                  {e.peak_value !== null && sensor && (
                    <span class="muted"> · peak {formatValue(e.peak_value, sensor.unit)}</span>
                  )}{' '}
                  <span class="muted">
                    since <Time ts={e.started_at} />
                    {e.acknowledged_at && ' · acknowledged'}
                  </span>
                </li>
              );
            })}
          </ul>
        </section>
      )}
      {data && data.sites.length === 0 && (
        <div class="card empty">
          <h2>Welcome</h2>
          <p>
            No sites yet. <a href="/app/sites/new">Add your first site</a> (a kitchen, a cold room, a
            pharmacy), then a device on it.
          </p>
        </div>
      )}
      <div class="site-grid">
        {views.map((v) => (
          <section
            class={`card site-card worst-${v.rows[0]?.state ?? 'none'}`}
            key={v.site.id}
            aria-labelledby={`site-${v.site.id}`}
          >
            <h2 id={`site-${v.site.id}`}>
              <a href={`/app/sites/${seg(v.site.id)}`}>{v.site.name}</a>
            </h2>
            <StateCounts sensors={v.rows} />
            <p class="muted small">
              {v.deviceCount === 0 ? (
                <>
                  No devices. <a href={`/app/sites/${seg(v.site.id)}/devices/new`}>Add a device</a>
                </>
              ) : (
                <>
                  {v.deviceCount} {v.deviceCount === 1 ? 'device' : 'devices'}
                  {v.offline > 0 && `, ${v.offline} offline`}
                </>
              )}
            </p>
            {v.rows.length > 0 && (
              <div class="table-wrap">
                <table class="sensors">
                  <caption class="visually-hidden">Sensors of {v.site.name}</caption>
                  <thead>
                    <tr>
                      <th scope="col">Sensor</th>
                      <th scope="col">Value</th>
                      <th scope="col">State</th>
                    </tr>
                  </thead>
                  <tbody>
                    {v.rows.map((sensor) => {
                      const device = devices.get(sensor.device_id);
                      return (
                        <tr key={sensor.id} data-sensor={sensor.id}>
                          <td class="sensor-cell">
                            <a href={`/app/sensors/${seg(sensor.id)}`}>{sensorName(sensor)}</a>
                            <div class="muted small">
                              {device ? `${deviceName(device)} · ` : ''}
                              <Ago ts={sensor.last_ts} now={now} />
                            </div>
                          </td>
                          <td class="value">{formatValue(sensor.last_value, sensor.unit)}</td>
                          <td>
                            <StateBadge state={sensor.state} ruleEnabled={sensor.rule_enabled} />{' '}
                            <SeverityBadge severity={sensor.alert_severity} />
                          </td>
                        </tr>
                      );
                    })}
                  </tbody>
                </table>
              </div>
            )}
          </section>
        ))}
      </div>
    </>
  );
}
