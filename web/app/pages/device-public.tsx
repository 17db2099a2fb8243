import { useState } from 'preact/hooks';
import { api, seg, type ApiError } from '../api.ts';
import { ErrorBox, Field } from '../components/ui.tsx';
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
  const [lat, setLat] = useState(p?.lat === undefined || p.lat === null ? '' : String(p.lat));
  const [lon, setLon] = useState(p?.lon === undefined || p.lon === null ? '' : String(p.lon));
  const [organisation, setOrganisation] = useState(p?.organisation ?? '');
  const [error, setError] = useState<ApiError | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
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
    try {
      const updated = await api.patch<Device>(`/devices/${seg(device.id)}`, { public: settings });
      onSaved(updated);
      setSaved(
        updated.public?.enabled ? 'Saved: shown on the public map.' : 'Saved: not shown on the public map.',
      );
    } catch (err) {
      setError(err as ApiError);
    } finally {
      setBusy(false);
    }
  };

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
          <Field id="public-lat" label="Latitude" error={message('lat')} hint="−90 to 90, e.g. 52.5">
            <input
              id="public-lat"
              inputMode="decimal"
              value={lat}
              onInput={(e) => setLat(e.currentTarget.value)}
            />
          </Field>
          <Field id="public-lon" label="Longitude" error={message('lon')} hint="−180 to 180, e.g. 13.4">
            <input
              id="public-lon"
              inputMode="decimal"
              value={lon}
              onInput={(e) => setLon(e.currentTarget.value)}
            />
          </Field>
        </div>
        <Field id="public-organisation" label="Organisation (optional)" error={message('organisation')}>
          <input
            id="public-organisation"
            value={organisation}
            onInput={(e) => setOrganisation(e.currentTarget.value)}
          />
        </Field>
        {error && !fieldShown && <ErrorBox error={error} />}
        {saved && (
          <p class="success-box" role="status">
            {saved}
          </p>
        )}
        <button type="submit" class="primary" disabled={busy}>
          Save
        </button>
      </form>
    </section>
  );
}
