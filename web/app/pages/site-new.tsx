import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { api, ApiError, seg } from '../api.ts';
import { ErrorBox, Field } from '../components/ui.tsx';
import { useTitle } from '../hooks.ts';
import { browserTimeZone, timeZones, VERTICALS } from '../site-helpers.ts';
import type { Site } from '../types.ts';

/** A time-zone picker: every IANA zone the browser knows. */
export function TimeZoneSelect(props: {
  id: string;
  value: string;
  onChange: (zone: string) => void;
  'aria-describedby'?: string;
  'aria-invalid'?: boolean;
}) {
  const zones = timeZones();
  const list = zones.includes(props.value) ? zones : [props.value, ...zones];
  return (
    <select
      id={props.id}
      value={props.value}
      aria-describedby={props['aria-describedby']}
      aria-invalid={props['aria-invalid']}
      onChange={(e) => props.onChange(e.currentTarget.value)}
    >
      {list.map((z) => (
        <option key={z} value={z}>
          {z.replace(/_/g, ' ')}
        </option>
      ))}
    </select>
  );
}

/** Create a site: name, vertical (which sets the sensors' default thresholds), time zone. */
export function SiteNew() {
  useTitle('Add a site');
  const { route } = useLocation();
  const [name, setName] = useState('');
  const [vertical, setVertical] = useState('food_service');
  const [timezone, setTimezone] = useState(browserTimeZone());
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const hint = VERTICALS.find((v) => v.value === vertical)?.hint;

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const site = await api.post<Site>('/sites', { name, vertical, timezone });
      route(`/app/sites/${seg(site.id)}`);
    } catch (err) {
      setError(err as ApiError);
      setBusy(false);
    }
  };
  const nameError = error?.fieldMessage('name') ?? null;
  const verticalError = error?.code === 'unknown_vertical' ? error.message : null;
  const zoneError = error?.fieldMessage('timezone') ?? null;

  return (
    <>
      <p class="breadcrumb">
        <a href="/app/">Overview</a> /
      </p>
      <h1>Add a site</h1>
      <p>A site is one place you monitor: a kitchen, a cold room, a pharmacy, a server room.</p>
      <form onSubmit={(e) => void submit(e)} noValidate>
        <Field id="site-name" label="Name" error={nameError}>
          <input id="site-name" value={name} required onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <Field
          id="site-vertical"
          label="Kind of site"
          error={verticalError}
          hint={`${hint ?? ''}. Sets the thresholds new sensors start with; you can change them per sensor. It cannot be changed later.`}
        >
          <select id="site-vertical" value={vertical} onChange={(e) => setVertical(e.currentTarget.value)}>
            {VERTICALS.map((v) => (
              <option key={v.value} value={v.value}>
                {v.label}
              </option>
            ))}
          </select>
        </Field>
        <Field id="site-timezone" label="Time zone" error={zoneError} hint="Reports show times in it.">
          <TimeZoneSelect id="site-timezone" value={timezone} onChange={setTimezone} />
        </Field>
        {error && !nameError && !verticalError && !zoneError && <ErrorBox error={error} />}
        <div class="row-actions">
          <button type="submit" class="primary" disabled={busy}>
            Create site
          </button>
          <a class="button" href="/app/">
            Cancel
          </a>
        </div>
      </form>
    </>
  );
}
