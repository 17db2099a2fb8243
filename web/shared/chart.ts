/**
 * A sensor's time series as a uPlot chart, shared by the dashboard's sensor and event pages and the
 * public map. uPlot itself is imported on first use (`mountChart`), so a page that imports this file
 * does not carry the chart library in its first load; its stylesheet is imported here and lands in
 * the page's one CSS bundle (esbuild gathers the CSS of lazily loaded modules there too).
 *
 * Beyond the line, the chart draws the operating band (`ok_min..ok_max`, shaded green behind the
 * data) and alarm periods (shaded red, with a solid line where each alarm was raised). What it drew
 * is written on the container as data attributes (`data-band-y`, `data-band-x`, `data-alarms`), in
 * canvas pixels, so a test can look at the pixels there.
 */
import type uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { Series } from './series.ts';

export { BUCKETS, bucketSeconds, MAX_POINTS, pickBucket, RANGES, toSeries } from './series.ts';
export type { ApiPoint, Bucket, RangeName, Series } from './series.ts';

/** A period shaded as an alarm: from `alarm_at` (seconds) to its end, or to the range's end while open. */
export interface AlarmMark {
  from: number;
  to: number | null;
}

export interface ChartOptions {
  /** The series' name in the legend ("Fridge · temperature"). */
  label: string;
  unit: string;
  /** The x range shown, in seconds (the chosen range, even where there is no data). */
  from: number;
  to: number;
  /** The operating band, shaded; null for none (a disabled rule). */
  band: { min: number; max: number } | null;
  alarms: AlarmMark[];
  height?: number;
}

export interface ChartHandle {
  update(series: Series, options: ChartOptions): void;
  destroy(): void;
}

const BAND_FILL = 'rgba(26, 127, 55, 0.14)';
const BAND_EDGE = 'rgba(26, 127, 55, 0.55)';
const ALARM_FILL = 'rgba(207, 34, 46, 0.13)';
const ALARM_EDGE = '#cf222e';
const LINE = '#0b57d0';
const AXIS = '#57606a';
const GRID = 'rgba(0, 0, 0, 0.07)';

/** A number with the unit, to one decimal below 100 (as a thermometer shows it). */
function formatTick(value: number, unit: string): string {
  const digits = Math.abs(value) >= 100 || Number.isInteger(value) ? 0 : 1;
  return `${value.toFixed(digits)}${unit ? ` ${unit}` : ''}`;
}

/**
 * Draws the chart into `el` (emptied first) and keeps it as wide as `el`. Returns a handle to give
 * it new data or options, and to remove it.
 */
export async function mountChart(
  el: HTMLElement,
  series: Series,
  options: ChartOptions,
): Promise<ChartHandle> {
  const { default: UPlot } = await import('uplot');
  let current = options;

  const drawBackground = (u: uPlot) => {
    const { ctx, bbox } = u;
    ctx.save();
    ctx.beginPath();
    ctx.rect(bbox.left, bbox.top, bbox.width, bbox.height);
    ctx.clip();
    const band = current.band;
    if (band) {
      const top = u.valToPos(band.max, 'y', true);
      const bottom = u.valToPos(band.min, 'y', true);
      ctx.fillStyle = BAND_FILL;
      ctx.fillRect(bbox.left, top, bbox.width, Math.max(1, bottom - top));
      ctx.strokeStyle = BAND_EDGE;
      ctx.lineWidth = 1;
      ctx.setLineDash([6, 4]);
      for (const y of [top, bottom]) {
        ctx.beginPath();
        ctx.moveTo(bbox.left, y);
        ctx.lineTo(bbox.left + bbox.width, y);
        ctx.stroke();
      }
      ctx.setLineDash([]);
      el.dataset.bandY = String(Math.round((top + bottom) / 2));
      el.dataset.bandX = String(Math.round(bbox.left + 3));
    } else {
      delete el.dataset.bandY;
      delete el.dataset.bandX;
    }
    let drawn = 0;
    for (const a of current.alarms) {
      const x0 = u.valToPos(Math.max(a.from, current.from), 'x', true);
      const x1 = u.valToPos(Math.min(a.to ?? current.to, current.to), 'x', true);
      if (x1 < bbox.left || x0 > bbox.left + bbox.width) continue;
      ctx.fillStyle = ALARM_FILL;
      ctx.fillRect(x0, bbox.top, Math.max(2, x1 - x0), bbox.height);
      if (a.from >= current.from) {
        ctx.strokeStyle = ALARM_EDGE;
        ctx.lineWidth = 2;
        ctx.beginPath();
        ctx.moveTo(x0, bbox.top);
        ctx.lineTo(x0, bbox.top + bbox.height);
        ctx.stroke();
      }
      drawn++;
    }
    el.dataset.alarms = String(drawn);
    ctx.restore();
  };

  const opts = (): uPlot.Options => ({
    width: Math.max(240, el.clientWidth),
    height: current.height ?? 280,
    scales: {
      x: { time: true, range: () => [current.from, current.to] },
      y: {
        range: (_u, min, max) => {
          // The band is always in view, so a reading's distance from it can be seen.
          const lo = Math.min(...[min, current.band?.min].filter((v): v is number => Number.isFinite(v)));
          const hi = Math.max(...[max, current.band?.max].filter((v): v is number => Number.isFinite(v)));
          if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [0, 1];
          const pad = Math.max((hi - lo) * 0.1, 0.5);
          return [lo - pad, hi + pad];
        },
      },
    },
    axes: [
      { stroke: AXIS, grid: { stroke: GRID } },
      {
        stroke: AXIS,
        grid: { stroke: GRID },
        size: 64,
        values: (_u, splits) => splits.map((v) => formatTick(v, current.unit)),
      },
    ],
    series: [
      {},
      {
        label: current.label,
        stroke: LINE,
        width: 2,
        spanGaps: false,
        points: { show: series.ts.length < 60 },
        value: (_u, v) => (v === null || v === undefined ? '–' : formatTick(v, current.unit)),
      },
    ],
    cursor: { drag: { x: false, y: false } },
    hooks: { drawClear: [drawBackground] },
  });

  const data = (s: Series): uPlot.AlignedData => [s.ts, s.values];
  el.replaceChildren();
  let plot = new UPlot(opts(), data(series), el);
  const resize = new ResizeObserver(() => {
    const width = Math.max(240, el.clientWidth);
    if (width !== plot.width) plot.setSize({ width, height: current.height ?? 280 });
  });
  resize.observe(el);

  return {
    update(next, nextOptions) {
      current = nextOptions;
      // Options such as the point markers depend on the data: a new chart is cheap at this size.
      plot.destroy();
      el.replaceChildren();
      plot = new UPlot(opts(), data(next), el);
    },
    destroy() {
      resize.disconnect();
      plot.destroy();
    },
  };
}
