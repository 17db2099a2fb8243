import { useEffect, useRef } from 'preact/hooks';
import {
  mountChart,
  type ChartOptions,
  type Series,
  pickBucket,
  bucketSeconds,
  toSeries,
  type AlarmMark,
  type ApiPoint,
  type ChartHandle,
} from '../../shared/chart.ts';
import { api, seg, type ApiError, type Page } from '../api.ts';
import { useLoad } from '../hooks.ts';
import { ErrorBox, Loading } from './ui.tsx';
import { unitSuffix } from '../types.ts';

/** Buckets per page asked of the read API (its maximum). */
const PAGE = 500;

/** Every bucket of the range (mean per bucket), following `next_cursor`. */
export async function loadBuckets(channelId: string, from: string, to: string): Promise<ApiPoint[]> {
  const agg = pickBucket(Date.parse(from), Date.parse(to));
  const base =
    `/channels/${seg(channelId)}/measurements?agg=${agg}&fn=mean&limit=${PAGE}` +
    `&from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`;
  const points: ApiPoint[] = [];
  let cursor: string | null = null;
  do {
    const page: Page<ApiPoint> = await api.get<Page<ApiPoint>>(
      cursor ? `${base}&cursor=${encodeURIComponent(cursor)}` : base,
    );
    points.push(...page.data);
    cursor = page.has_more ? page.next_cursor : null;
  } while (cursor);
  return points;
}

/** What a bucket width reads as in a sentence. */
const BUCKET_WORDS: Record<string, string> = {
  '1m': '1-minute',
  '5m': '5-minute',
  '15m': '15-minute',
  '1h': 'hourly',
  '6h': '6-hour',
  '1d': 'daily',
};

/**
 * A channel's measurements over [from, to) as a chart: means of buckets chosen so the range has
 * a few hundred points, the operating band shaded, the alarm periods marked. `version` reloads the
 * data (a new reading arrived).
 */
export function SensorChart(props: {
  channelId: string;
  label: string;
  unit: string;
  /** The range as RFC 3339 (as the API is asked: a range the API refuses is its error to show). */
  from: string;
  to: string;
  band: { min: number; max: number } | null;
  alarms: AlarmMark[];
  /** A silence longer than this (seconds) breaks the line: the sensor's `no_data_min`. */
  gapSeconds: number;
  version?: number;
  /** Takes the read's error instead of the chart showing it (to show it next to a field). */
  onError?: (error: ApiError | null) => void;
}) {
  const { channelId, from, to } = props;
  const fromMs = Date.parse(from);
  const toMs = Date.parse(to);
  // The points come with the range they are of: a live reading reloads the same range, and the
  // points shown meanwhile (or after a passing failure, a 429 or a 503) are still that range's.
  const range = `${channelId} ${from} ${to}`;
  const {
    data: loaded,
    error,
    loading,
  } = useLoad(
    () => loadBuckets(channelId, from, to).then((rows) => ({ rows, range })),
    [channelId, from, to, props.version ?? 0],
  );
  const data = loaded?.rows;
  const ofThisRange = loaded?.range === range;
  useEffect(() => props.onError?.(error), [error]);
  const box = useRef<HTMLDivElement>(null);
  const chart = useRef<ChartHandle | null>(null);
  const agg = pickBucket(fromMs, toMs);

  // The chart is made once (uPlot loads on first use) and updated after; what arrives while it is
  // being made is applied when it is ready.
  const latest = useRef<{ series: Series; options: ChartOptions } | null>(null);
  const mounting = useRef(false);
  const unmounted = useRef(false);
  // A range that could not be read shows nothing, not another range's points under its name.
  const unreadable = error !== null && !ofThisRange;
  const shown = unreadable ? [] : data;
  useEffect(() => {
    if (!shown || !box.current) return;
    const next = {
      series: toSeries(shown, bucketSeconds(agg), props.gapSeconds),
      options: {
        label: props.label,
        unit: props.unit,
        from: fromMs / 1000,
        to: toMs / 1000,
        band: props.band,
        alarms: props.alarms,
      },
    };
    latest.current = next;
    if (chart.current) {
      chart.current.update(next.series, next.options);
      return;
    }
    if (mounting.current) return;
    mounting.current = true;
    void mountChart(box.current, next.series, next.options).then((handle) => {
      mounting.current = false;
      if (unmounted.current) {
        handle.destroy();
        return;
      }
      chart.current = handle;
      if (latest.current !== next) handle.update(latest.current!.series, latest.current!.options);
    });
  }, [data, unreadable, props.band?.min, props.band?.max, JSON.stringify(props.alarms)]);

  useEffect(
    () => () => {
      unmounted.current = true;
      chart.current?.destroy();
      chart.current = null;
    },
    [],
  );

  const values = (shown ?? []).map((p) => p.value);
  // The caption says what the chart shows now: a refused range, a range being read, or its means.
  const summary = unreadable
    ? 'Nothing shown: this range could not be read'
    : loading && !ofThisRange
      ? 'Reading the measurements of this range'
      : values.length
        ? `${values.length} ${BUCKET_WORDS[agg]} means from ${Math.min(...values).toFixed(1)} to ${Math.max(...values).toFixed(1)}${unitSuffix(props.unit)}`
        : 'No measurements in this range';
  return (
    <figure class="chart">
      {!props.onError && <ErrorBox error={error} />}
      {loading && !data && <Loading what="Loading measurements" />}
      <div
        class="chart-canvas"
        ref={box}
        role="img"
        aria-label={`Chart of ${props.label}: ${summary}${props.band ? `; operating band ${props.band.min} to ${props.band.max}${unitSuffix(props.unit)}` : ''}`}
      />
      <figcaption class="muted">
        {summary}. <span class="legend-band" aria-hidden="true" /> operating band{' '}
        <span class="legend-alarm" aria-hidden="true" /> alarm
      </figcaption>
    </figure>
  );
}
