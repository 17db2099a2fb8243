import { useEffect, useState } from 'preact/hooks';
import { formatMetric, METRIC_NAMES } from './format.ts';
import { METRICS, publicApi, type BoardRow, type Metric } from './public-api.ts';

/** The top sensors by one metric; a row opens its sensor. */
export function Leaderboard(props: { onSelect: (id: string) => void }) {
  const [metric, setMetric] = useState<Metric>('hottest_now');
  const [rows, setRows] = useState<BoardRow[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    setRows(null);
    publicApi.board(metric).then(
      (r) => {
        if (!live) return;
        setRows(r);
        setError(null);
      },
      (err: unknown) => live && setError(err instanceof Error ? err.message : String(err)),
    );
    return () => {
      live = false;
    };
  }, [metric]);
  return (
    <section class="panel board" aria-labelledby="board-title">
      <h2 id="board-title">Leaderboard</h2>
      <label for="board-metric" class="visually-hidden">
        Rank by
      </label>
      <select id="board-metric" value={metric} onChange={(e) => setMetric(e.currentTarget.value as Metric)}>
        {METRICS.map((m) => (
          <option key={m} value={m}>
            {METRIC_NAMES[m]}
          </option>
        ))}
      </select>
      {error ? (
        <p role="alert" class="error">
          {error}
        </p>
      ) : null}
      {rows === null ? (
        <p class="muted">Loading…</p>
      ) : rows.length === 0 ? (
        <p class="muted">No sensor qualifies yet.</p>
      ) : (
        <ol class="rows">
          {rows.map((r) => (
            <li key={r.id}>
              <button type="button" class="row" onClick={() => props.onSelect(r.id)}>
                <span class="rank">{r.rank}</span>
                <span class="who">
                  {r.nickname}
                  <span class="muted"> · {r.locationName}</span>
                </span>
                <span class="metric">{formatMetric(metric, r.metric, r.unit)}</span>
              </button>
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}
