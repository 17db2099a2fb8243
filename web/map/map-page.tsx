import { useEffect, useState } from 'preact/hooks';
import { Leaderboard } from './leaderboard.tsx';
import { KINDS, publicApi, type Kind, type Pin, type Stats } from './public-api.ts';
import { SensorPanel } from './sensor-panel.tsx';
import { KIND_NAMES, formatTime } from './format.ts';
import { WorldMap } from './world-map.tsx';

/** How often the pins and stats are asked again (the server answers 304 while nothing changed). */
const REFRESH_MS = 60_000;

/**
 * The public map (`/map`): community sensors as pins on a world outline drawn here (no tile
 * server), a filter by kind, the stats, the leaderboards, and a sensor's detail and chart on click.
 */
export function MapPage() {
  const [kind, setKind] = useState<Kind | null>(null);
  const [pins, setPins] = useState<Pin[] | null>(null);
  const [stats, setStats] = useState<Stats | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [selected, setSelected] = useState<string | null>(null);

  useEffect(() => {
    let live = true;
    const load = () => {
      Promise.all([publicApi.pins(kind), publicApi.stats()]).then(
        ([p, s]) => {
          if (!live) return;
          setPins(p);
          setStats(s);
          setError(null);
        },
        (err: unknown) => live && setError(err instanceof Error ? err.message : String(err)),
      );
    };
    load();
    const timer = setInterval(load, REFRESH_MS);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [kind]);

  return (
    <div class="layout">
      <header class="top">
        <h1>Community sensors</h1>
        <p class="stats" aria-live="polite">
          {stats ? (
            <>
              <strong>{stats.sensors}</strong> sensors · <strong>{stats.locations}</strong> locations ·{' '}
              <strong>{stats.orgs}</strong> {stats.orgs === 1 ? 'owner' : 'owners'}
              {stats.lastUpdate ? <> · last reading {formatTime(stats.lastUpdate)}</> : null}
            </>
          ) : (
            'Loading…'
          )}
        </p>
      </header>
      <main class="main">
        <section class="map-area" aria-label="Map">
          <div class="kinds" role="group" aria-label="Show sensors of kind">
            {[null, ...KINDS].map((k) => (
              <button
                type="button"
                key={k ?? 'all'}
                class={`kind-button kind-${k ?? 'all'}`}
                aria-pressed={kind === k}
                onClick={() => setKind(k)}
              >
                {k ? KIND_NAMES[k] : 'All'}
              </button>
            ))}
          </div>
          {error ? (
            <p role="alert" class="error">
              The sensors could not be loaded: {error}
            </p>
          ) : null}
          <WorldMap pins={pins ?? []} selected={selected} onSelect={setSelected} />
          {pins && pins.length === 0 ? <p class="muted">No public sensors of this kind yet.</p> : null}
        </section>
        <aside class="side">
          {selected ? (
            <SensorPanel id={selected} onClose={() => setSelected(null)} />
          ) : (
            <p class="hint muted">Select a pin to see its readings of the last day, week or month.</p>
          )}
          <Leaderboard onSelect={setSelected} />
        </aside>
      </main>
    </div>
  );
}
