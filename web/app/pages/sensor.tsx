import { useEffect, useState } from 'preact/hooks';
import { useRoute } from 'preact-iso';
import { RANGES, type AlarmMark, type RangeName } from '../../shared/chart.ts';
import { all, api, ApiError, seg, API_BASE } from '../api.ts';
import { alarmTitle } from '../components/alarm-bits.tsx';
import { SensorChart } from '../components/sensor-chart.tsx';
import { LiveStatus } from '../components/live-status.tsx';
import { AlertRules } from '../components/alert-rules.tsx';
import {
  Ago,
  ErrorBox,
  Field,
  LoadFailed,
  Loading,
  SeverityBadge,
  StateBadge,
  Time,
} from '../components/ui.tsx';
import { fieldOf, fromLocalInput, toLocalInput } from '../forms.ts';
import { useLoad, useTitle } from '../hooks.ts';
import { useLive, useLiveCopies, useNow } from '../live.ts';
import { sensorName as kindName } from '../site-helpers.ts';
import {
  deviceName,
  formatValue,
  unitHint,
  type AlarmEvent,
  type Device,
  type Sensor,
  type Site,
} from '../types.ts';
import '../sensors.css';

interface Silence {
  id: string;
  sensor_id: string;
  from: string;
  to: string;
  reason: string;
  created_by: string;
  created_at: string;
  ended_at: string | null;
  ended_by: string | null;
}

interface Context {
  sensor: Sensor;
  device: Device;
  site: Site;
}

async function loadContext(id: string): Promise<Context> {
  const sensor = await api.get<Sensor>(`/sensors/${seg(id)}`);
  const device = await api.get<Device>(`/devices/${seg(sensor.device_id)}`);
  const site = await api.get<Site>(`/sites/${seg(device.site_id)}`);
  return { sensor, device, site };
}

export const sensorName = (c: { sensor: Sensor; device: Device }) =>
  `${deviceName(c.device)} · ${kindName(c.sensor)}`;

/** A sensor: its chart, rule, alert rules, silence windows, recompute and CSV download. */
export function SensorPage() {
  const { params } = useRoute();
  const id = params.id!;
  const ctx = useLoad(() => loadContext(id), [id]);
  // The sensor as it arrives live or from a save, laid over the loaded one while it is newer: a
  // reload (after a reconnect) that answers replaces it, one that fails leaves it.
  const copies = useLiveCopies<Sensor>();
  const setSensor = copies.put;
  const [version, setVersion] = useState(0);
  const current = ctx.data ? copies.get(ctx.data.sensor, ctx.loadedAt) : null;
  const now = useNow();
  useTitle(ctx.data ? sensorName(ctx.data) : 'Sensor');

  // A new reading or state of this sensor arrives live: the header and the chart follow.
  const status = useLive((e) => {
    if (e.type === 'sensor' && e.sensor.id === id) {
      setSensor(e.sensor);
      setVersion((v) => v + 1);
    } else if (e.type === 'alarm' && e.event.sensor_id === id) {
      setVersion((v) => v + 1);
    } else if (e.type === 'resync') {
      ctx.reload();
      setVersion((v) => v + 1);
    }
  });

  // A silence or a recompute can change the state (`silent`, or alarms found again): the sensor
  // is read again with the chart, whether or not the stream says so.
  const changed = () => {
    setVersion((v) => v + 1);
    api.get<Sensor>(`/sensors/${seg(id)}`).then(setSensor, () => undefined);
  };

  if (ctx.error && !ctx.data) return <LoadFailed error={ctx.error} what="sensor" />;
  if (!ctx.data || !current) return <Loading />;
  const { device, site } = ctx.data;
  return (
    <>
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href="/app/">Overview</a> › <a href={`/app/sites/${seg(site.id)}`}>{site.name}</a> ›{' '}
        <a href={`/app/devices/${seg(device.id)}`}>{deviceName(device)}</a>
      </nav>
      <div class="page-head">
        <h1>{sensorName({ sensor: current, device })}</h1>
        <LiveStatus status={status} />
      </div>
      <p class="sensor-now">
        <span class="big-value">{formatValue(current.last_value, current.unit)}</span>{' '}
        <StateBadge state={current.state} ruleEnabled={current.rule_enabled} />{' '}
        <SeverityBadge severity={current.alert_severity} />{' '}
        <span class="muted">
          last reading <Ago ts={current.last_ts} now={now} />
        </span>
      </p>
      <ChartSection sensor={current} label={sensorName({ sensor: current, device })} version={version} />
      <RuleForm sensor={current} onSaved={setSensor} />
      <AlertRules sensor={current} siteId={site.id} />
      <Silences sensor={current} onChange={changed} />
      <Recompute sensor={current} onDone={changed} />
    </>
  );
}

type Choice = RangeName | 'custom';

function ChartSection({ sensor, label, version }: { sensor: Sensor; label: string; version: number }) {
  const [choice, setChoice] = useState<Choice>('24h');
  // The range's end is fixed when it is chosen (and moves with each live reading), so the chart
  // does not reload on every render.
  const [now, setNow] = useState(() => Date.now());
  const [custom, setCustom] = useState(() => ({
    from: toLocalInput(Date.now() - RANGES['24h'] * 1000),
    to: toLocalInput(Date.now()),
  }));
  const [applied, setApplied] = useState(custom);
  const [lastVersion, setLastVersion] = useState(version);
  if (version !== lastVersion) {
    setLastVersion(version);
    setNow(Date.now());
  }
  const [from, to] =
    choice === 'custom'
      ? [fromLocalInput(applied.from), fromLocalInput(applied.to)]
      : [new Date(now - RANGES[choice] * 1000).toISOString(), new Date(now).toISOString()];
  const fromMs = Date.parse(from);
  // The read's answer for the range: a custom range the API refuses shows its message at the field.
  const [rangeError, setRangeError] = useState<ApiError | null>(null);
  const rangeField = choice === 'custom' ? fieldOf(rangeError, ['to', 'from']) : null;

  const events = useLoad(
    () =>
      api
        .get<{ data: AlarmEvent[] }>(
          `/events?sensor_id=${seg(sensor.id)}&to=${encodeURIComponent(to)}&limit=100`,
        )
        .then((p) => p.data),
    [sensor.id, to, version],
  );
  const inRange = (events.data ?? []).filter((e) => e.ended_at === null || Date.parse(e.ended_at) >= fromMs);
  const alarms: AlarmMark[] = inRange.map((e) => ({
    from: Date.parse(e.alarm_at ?? e.started_at) / 1000,
    to: e.ended_at ? Date.parse(e.ended_at) / 1000 : null,
  }));
  const band = sensor.rule_enabled ? { min: sensor.ok_min, max: sensor.ok_max } : null;
  const csv = rangeError
    ? null
    : `${API_BASE}/channels/${seg(sensor.channel_id)}/measurements?format=csv` +
      `&from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`;

  return (
    <section aria-labelledby="chart-h">
      <h2 id="chart-h">Measurements</h2>
      <div class="range-picker" role="group" aria-label="Time range">
        {(['24h', '7d', '30d', 'custom'] as const).map((c) => (
          <button
            type="button"
            key={c}
            aria-pressed={choice === c}
            onClick={() => {
              setChoice(c);
              setNow(Date.now());
            }}
          >
            {c === '24h' ? '24 h' : c === '7d' ? '7 days' : c === '30d' ? '30 days' : 'Custom'}
          </button>
        ))}
      </div>
      {choice === 'custom' && (
        <form
          class="inline-form"
          onSubmit={(e) => {
            e.preventDefault();
            setApplied(custom);
          }}
        >
          <Field
            id="range-from"
            label="From"
            error={rangeField?.field === 'from' ? rangeField.message : null}
          >
            <input
              id="range-from"
              type="datetime-local"
              value={custom.from}
              onInput={(e) => setCustom({ ...custom, from: e.currentTarget.value })}
            />
          </Field>
          <Field id="range-to" label="To" error={rangeField?.field === 'to' ? rangeField.message : null}>
            <input
              id="range-to"
              type="datetime-local"
              value={custom.to}
              onInput={(e) => setCustom({ ...custom, to: e.currentTarget.value })}
            />
          </Field>
          <button type="submit">Show</button>
        </form>
      )}
      {rangeError && !rangeField && <ErrorBox error={rangeError} />}
      <SensorChart
        channelId={sensor.channel_id}
        label={label}
        unit={sensor.unit}
        from={from}
        to={to}
        band={band}
        alarms={alarms}
        gapSeconds={sensor.no_data_min * 60}
        version={version}
        onError={setRangeError}
      />
      {inRange.length > 0 && (
        <details class="sensor-alarms">
          <summary>Alarms in this range ({inRange.length})</summary>
          <ul>
            {inRange.map((e) => (
              <li key={e.id}>
                <a href={`/app/events/${seg(e.id)}`}>{alarmTitle(e, sensor.unit)}</a>{' '}
                <span class="muted">
                  <Time ts={e.started_at} />
                  {e.ended_at ? (
                    <>
                      {' '}
                      to <Time ts={e.ended_at} />
                    </>
                  ) : (
                    ' · open'
                  )}
                  {e.acknowledged_at ? ' · acknowledged' : ''}
                </span>
              </li>
            ))}
          </ul>
        </details>
      )}
      {csv && (
        <p>
          <a class="button" href={csv} download>
            Download CSV of this range
          </a>{' '}
          <span class="muted">every measurement, columns ts,value (UTC)</span>
        </p>
      )}
    </section>
  );
}

const RULE_FIELDS = ['ok_min', 'ok_max', 'grace_min', 'no_data_min', 'rule_enabled'] as const;

type RuleFormValues = {
  ok_min: string;
  ok_max: string;
  grace_min: string;
  no_data_min: string;
  rule_enabled: boolean;
};
const NUMBER_FIELDS = ['ok_min', 'ok_max', 'grace_min', 'no_data_min'] as const;

/**
 * The sensor's thresholds. A save sends only the fields changed in the form, so a change made
 * elsewhere meanwhile (another user, the API) is not undone; a field not edited here follows the
 * sensor as it is read again. A decimal comma is read as a decimal point.
 */
function RuleForm({ sensor, onSaved }: { sensor: Sensor; onSaved: (s: Sensor) => void }) {
  const initial = (): RuleFormValues => ({
    ok_min: String(sensor.ok_min),
    ok_max: String(sensor.ok_max),
    grace_min: String(sensor.grace_min),
    no_data_min: String(sensor.no_data_min),
    rule_enabled: sensor.rule_enabled,
  });
  const [base, setBase] = useState(initial);
  const [form, setForm] = useState(initial);
  const [error, setError] = useState<ApiError | null>(null);
  const [saved, setSaved] = useState(false);
  const [busy, setBusy] = useState(false);
  const onField = fieldOf(error, RULE_FIELDS);
  const msg = (f: string) => (onField?.field === f ? onField.message : null);
  useEffect(() => {
    const next = initial();
    setForm((f) => {
      const merged = { ...f };
      for (const k of RULE_FIELDS) if (f[k] === base[k]) (merged as Record<string, unknown>)[k] = next[k];
      return merged;
    });
    setBase(next);
  }, [sensor.ok_min, sensor.ok_max, sensor.grace_min, sensor.no_data_min, sensor.rule_enabled]);

  const submit = async (e: Event) => {
    e.preventDefault();
    setSaved(false);
    const changes: Record<string, number | boolean | null> = {};
    for (const f of NUMBER_FIELDS) {
      if (form[f] === base[f]) continue;
      const text = form[f].trim().replace(',', '.');
      const value = text === '' ? null : Number(text);
      if (value !== null && !Number.isFinite(value)) {
        setError(new ApiError(400, 'invalid_request', `${f} must be a number`));
        return;
      }
      changes[f] = value;
    }
    if (form.rule_enabled !== base.rule_enabled) changes.rule_enabled = form.rule_enabled;
    if (Object.keys(changes).length === 0) {
      setError(null);
      setSaved(true);
      return;
    }
    setBusy(true);
    try {
      const updated = await api.patch<Sensor>(`/sensors/${seg(sensor.id)}`, changes);
      setError(null);
      setSaved(true);
      onSaved(updated);
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, 'client', String(err)));
    } finally {
      setBusy(false);
    }
  };
  const input = (f: 'ok_min' | 'ok_max' | 'grace_min' | 'no_data_min', step: string) => (
    <input
      id={`rule-${f}`}
      name={f}
      type="text"
      inputMode={step === '1' ? 'numeric' : 'decimal'}
      value={form[f]}
      onInput={(e) => setForm({ ...form, [f]: e.currentTarget.value })}
    />
  );
  return (
    <section aria-labelledby="rule-h">
      <h2 id="rule-h">Thresholds</h2>
      <form class="rule-form" onSubmit={(e) => void submit(e)} noValidate>
        <div class="field-row">
          <Field id="rule-ok_min" label={`Lowest OK value (${unitHint(sensor.unit)})`} error={msg('ok_min')}>
            {input('ok_min', 'any')}
          </Field>
          <Field id="rule-ok_max" label={`Highest OK value (${unitHint(sensor.unit)})`} error={msg('ok_max')}>
            {input('ok_max', 'any')}
          </Field>
        </div>
        <div class="field-row">
          <Field
            id="rule-grace_min"
            label="Grace (minutes)"
            hint="How long a reading may stay outside before it is an alarm."
            error={msg('grace_min')}
          >
            {input('grace_min', '1')}
          </Field>
          <Field
            id="rule-no_data_min"
            label="No data after (minutes)"
            hint="Silence from the device this long is an alarm."
            error={msg('no_data_min')}
          >
            {input('no_data_min', '1')}
          </Field>
        </div>
        <div class="field checkbox">
          <input
            id="rule-rule_enabled"
            type="checkbox"
            checked={form.rule_enabled}
            onChange={(e) => setForm({ ...form, rule_enabled: e.currentTarget.checked })}
          />
          <label for="rule-rule_enabled">Alarms on for this sensor</label>
          {msg('rule_enabled') && (
            <p class="field-error" role="alert">
              {msg('rule_enabled')}
            </p>
          )}
        </div>
        {error && !onField && <ErrorBox error={error} />}
        <button type="submit" class="primary" disabled={busy}>
          Save thresholds
        </button>{' '}
        {saved && (
          <span role="status" class="ok-note">
            Saved.
          </span>
        )}
      </form>
    </section>
  );
}

const SILENCE_FIELDS = ['reason', 'from', 'to'] as const;

function Silences({ sensor, onChange }: { sensor: Sensor; onChange: () => void }) {
  const list = useLoad(() => all<Silence>(`/sensors/${seg(sensor.id)}/silences`), [sensor.id]);
  // From and To are null until typed in: they then mean "now" and "an hour later", shown as the
  // time goes by and taken when Silence is pressed, so a page left open never silences the past.
  // To the second: a window "from now" cut to the minute would reach back over an alarm raised
  // earlier in that minute.
  const [form, setForm] = useState<{ from: string | null; to: string | null; reason: string }>({
    from: null,
    to: null,
    reason: '',
  });
  const shownNow = useNow();
  const defaults = (at: number) => ({
    from: toLocalInput(at, true),
    to: toLocalInput(at + 3600_000, true),
  });
  const shown = { ...defaults(shownNow), ...withoutNulls(form) };
  const [error, setError] = useState<ApiError | null>(null);
  const [endError, setEndError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const onField = fieldOf(error, SILENCE_FIELDS);
  const msg = (f: string) => (onField?.field === f ? onField.message : null);

  const create = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    const sent = { ...defaults(Date.now()), ...withoutNulls(form) };
    try {
      await api.post(`/sensors/${seg(sensor.id)}/silence`, {
        from: fromLocalInput(sent.from),
        to: fromLocalInput(sent.to),
        reason: form.reason,
      });
      setError(null);
      setForm({ from: null, to: null, reason: '' });
      list.reload();
      onChange();
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, 'client', String(err)));
    } finally {
      setBusy(false);
    }
  };
  const end = async (s: Silence) => {
    try {
      await api.del(`/silences/${seg(s.id)}`);
      setEndError(null);
      list.reload();
      onChange();
    } catch (err) {
      setEndError(err instanceof ApiError ? err : new ApiError(0, 'client', String(err)));
    }
  };
  const now = Date.now();
  const active = (s: Silence) => s.ended_at === null && Date.parse(s.to) > now;
  return (
    <section aria-labelledby="silence-h">
      <h2 id="silence-h">Silence windows</h2>
      <p class="muted">
        While a window is on, alarms are still recorded but nobody is notified; an alarm still open when it
        ends is announced then.
      </p>
      <ErrorBox error={list.error ?? endError} />
      {list.data && list.data.length > 0 && (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Silence windows, newest first</caption>
            <thead>
              <tr>
                <th scope="col">From</th>
                <th scope="col">To</th>
                <th scope="col">Reason</th>
                <th scope="col">
                  <span class="visually-hidden">Action</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.data.map((s) => (
                <tr key={s.id}>
                  <td>
                    <Time ts={s.from} />
                  </td>
                  <td>
                    <Time ts={s.to} />
                    {s.ended_at && <span class="muted"> (ended early)</span>}
                  </td>
                  <td>{s.reason}</td>
                  <td>
                    {active(s) && (
                      <button type="button" onClick={() => void end(s)}>
                        {Date.parse(s.from) > now ? 'Cancel' : 'End now'}
                        <span class="visually-hidden"> the window “{s.reason}”</span>
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {list.data && list.data.length === 0 && <p>No silence windows.</p>}
      <form class="silence-form" onSubmit={(e) => void create(e)} noValidate>
        <h3>New silence window</h3>
        <div class="field-row">
          <Field id="silence-from" label="From" error={msg('from')}>
            <input
              id="silence-from"
              type="datetime-local"
              step="1"
              value={shown.from}
              onInput={(e) => setForm({ ...form, from: e.currentTarget.value })}
            />
          </Field>
          <Field id="silence-to" label="To" error={msg('to')}>
            <input
              id="silence-to"
              type="datetime-local"
              step="1"
              value={shown.to}
              onInput={(e) => setForm({ ...form, to: e.currentTarget.value })}
            />
          </Field>
        </div>
        <Field id="silence-reason" label="Reason" error={msg('reason')} hint="For example: defrosting.">
          <input
            id="silence-reason"
            type="text"
            maxLength={500}
            value={form.reason}
            onInput={(e) => setForm({ ...form, reason: e.currentTarget.value })}
          />
        </Field>
        {error && !onField && <ErrorBox error={error} />}
        <button type="submit" disabled={busy}>
          Silence
        </button>
      </form>
    </section>
  );
}

/** The fields of `o` that are not null. */
function withoutNulls<T extends Record<string, unknown>>(
  o: T,
): Partial<{ [K in keyof T]: NonNullable<T[K]> }> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null)) as Partial<{
    [K in keyof T]: NonNullable<T[K]>;
  }>;
}

interface RecomputeResult {
  replayed: number;
  events_created: number;
  events_updated: number;
  events_withdrawn: number;
}

function Recompute({ sensor, onDone }: { sensor: Sensor; onDone: () => void }) {
  const [result, setResult] = useState<RecomputeResult | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const run = async () => {
    setBusy(true);
    try {
      setResult(await api.post<RecomputeResult>(`/sensors/${seg(sensor.id)}/recompute`));
      setError(null);
      onDone();
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, 'client', String(err)));
    } finally {
      setBusy(false);
    }
  };
  return (
    <section aria-labelledby="recompute-h">
      <h2 id="recompute-h">Recompute</h2>
      <p class="muted">
        Judges the last 24 hours of measurements again with the rules in force at the time: missed alarms are
        created, alarms the data no longer supports are withdrawn.
      </p>
      <button type="button" onClick={() => void run()} disabled={busy}>
        Recompute the last 24 hours
      </button>
      <ErrorBox error={error} />
      {result && (
        <p role="status">
          {result.replayed} measurements judged: {result.events_created} alarms created,{' '}
          {result.events_updated} updated, {result.events_withdrawn} withdrawn.
        </p>
      )}
    </section>
  );
}
