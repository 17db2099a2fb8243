import { useState } from 'preact/hooks';
import { api, seg } from '../api.ts';
import { ErrorBox, Field } from '../components/ui.tsx';
import { useSubmit } from '../hooks.ts';
import type { Device } from '../types.ts';

/** The API's names of the public settings, as the form's fields report their errors. */
const FIELDS = ['nickname', 'location_name', 'lat', 'lon', 'organisation'] as const;

/** A coordinate as typed: empty is left out, anything else is sent for the cloud to judge. */
function coordinate(text: string): number | string | undefined {
  const t = text.trim().replace(',', '.');
  if (t === '') return undefined;
  const n = Number(t);
  return Number.isFinite(n) ? n : t;
}

/** The position's two fields. */
const COORDINATES = [
  { field: 'lat', label: 'Latitude', hint: '−90 to 90, e.g. 52.5' },
  { field: 'lon', label: 'Longitude', hint: '−180 to 180, e.g. 13.4' },
] as const;

/** A coordinate as the field shows it. */
function coordinateText(value: number | null | undefined): string {
  return value === undefined || value === null ? '' : String(value);
}

/**
 * Share a device's readings on the public map (docs/api/public.md, "Publishing a device"): a
 * nickname and a place instead of the device's and site's names, a position, and whether it is
 * shown. The cloud merges what is sent with what the device has and says which field is wrong.
 */
export function ShareOnMap({ device, onSaved }: { device: Device; onSaved: (d: Device) => void }) {
  const p = device.public;
  const [enabled, setEnabled] = useState(p?.enabled ?? false);
  const [nickname, setNickname] = useState(p?.nickname ?? '');
  const [place, setPlace] = useState(p?.location_name ?? '');
  const [lat, setLat] = useState(coordinateText(p?.lat));
  const [lon, setLon] = useState(coordinateText(p?.lon));
  const [organisation, setOrganisation] = useState(p?.organisation ?? '');
  const [saved, setSaved] = useState<string | null>(null);
  const { busy, error, submit } = useSubmit(async () => {
    setSaved(null);
    const settings: Record<string, unknown> = { enabled };
    if (nickname.trim() !== '') settings.nickname = nickname.trim();
    if (place.trim() !== '') settings.location_name = place.trim();
    const la = coordinate(lat);
    const lo = coordinate(lon);
    if (la !== undefined) settings.lat = la;
    if (lo !== undefined) settings.lon = lo;
    if (organisation.trim() !== '') settings.organisation = organisation.trim();
    else if (p?.organisation) settings.organisation = null;
    const updated = await api.patch<Device>(`/devices/${seg(device.id)}`, { public: settings });
    onSaved(updated);
    // The fields as the cloud keeps them: one emptied is kept, not removed (only organisation can be).
    const now = updated.public;
    setNickname(now?.nickname ?? '');
    setPlace(now?.location_name ?? '');
    setLat(coordinateText(now?.lat));
    setLon(coordinateText(now?.lon));
    setOrganisation(now?.organisation ?? '');
    setSaved(now?.enabled ? 'Saved: shown on the public map.' : 'Saved: not shown on the public map.');
  });

  const message = (field: string) => error?.fieldMessage(`public.${field}`) ?? null;
  const fieldShown = FIELDS.some((f) => message(f) !== null);
  return (
    <section class="card" aria-labelledby="public-head">
      <h2 id="public-head">Public map</h2>
      <p>
        {p?.enabled ? (
          <>
            Shown on the <a href="/map/">public map</a> as “{p.nickname}” ({p.location_name}).
          </>
        ) : (
          'Not shown on the public map.'
        )}
      </p>
      <p class="muted small">
        Anyone can then see its temperature, humidity, pressure and CO₂ readings, the latest and the last 30
        days as averages, with the nickname, place and position below: never the device’s or the site’s own
        name. Readings from before you share it are shown too.
      </p>
      <form onSubmit={(e) => void submit(e)} noValidate>
        <div class="field checkbox">
          <input
            id="public-enabled"
            type="checkbox"
            checked={enabled}
            onChange={(e) => setEnabled(e.currentTarget.checked)}
          />
          <label for="public-enabled">Show on the public map</label>
        </div>
        <Field id="public-nickname" label="Nickname" error={message('nickname')} hint="e.g. Kreuzberg roof">
          <input id="public-nickname" value={nickname} onInput={(e) => setNickname(e.currentTarget.value)} />
        </Field>
        <Field id="public-place" label="Place" error={message('location_name')} hint="e.g. Berlin">
          <input id="public-place" value={place} onInput={(e) => setPlace(e.currentTarget.value)} />
        </Field>
        <div class="form-grid">
          {COORDINATES.map((c) => (
            <Field
              key={c.field}
              id={`public-${c.field}`}
              label={c.label}
              error={message(c.field)}
              hint={c.hint}
            >
              <input
                id={`public-${c.field}`}
                inputMode="decimal"
                value={c.field === 'lat' ? lat : lon}
                onInput={(e) => (c.field === 'lat' ? setLat : setLon)(e.currentTarget.value)}
              />
            </Field>
          ))}
        </div>
        <Field id="public-organisation" label="Organisation (optional)" error={message('organisation')}>
          <input
            id="public-organisation"
            value={organisation}
            onInput={(e) => setOrganisation(e.currentTarget.value)}
          />
        </Field>
        {error && !fieldShown && <ErrorBox error={error} />}
        {/* Mounted before anything is said in it, so screen readers announce what is. */}
        <div role="status">{saved && <p class="success-box">{saved}</p>}</div>
        <button type="submit" class="primary" disabled={busy}>
          Save map settings
        </button>
      </form>
    </section>
  );
}
