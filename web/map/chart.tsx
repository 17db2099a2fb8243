import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { Reading } from './public-api.ts';

const TIME = new Intl.DateTimeFormat('en-GB', { hour: '2-digit', minute: '2-digit' });
const DAY = new Intl.DateTimeFormat('en-GB', { day: 'numeric', month: 'short' });

/**
 * The time axis's ticks as the rest of the page writes times (en-GB, 24-hour, the reader's zone):
 * `14:00` within a day, with the date under midnight, and `25 Nov` for ticks a day or more apart.
 */
function timeTicks(splits: number[], increment: number): string[] {
  return splits.map((s) => {
    const d = new Date(s * 1000);
    if (increment >= 86_400) return DAY.format(d);
    const midnight = d.getHours() === 0 && d.getMinutes() === 0;
    return midnight ? `${TIME.format(d)}\n${DAY.format(d)}` : TIME.format(d);
  });
}

/** A line chart of bucket means (uPlot), as wide as its container. */
export function Chart(props: { readings: Reading[]; unit: string; label: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const xs = props.readings.map((r) => Date.parse(r.ts) / 1000);
    const ys = props.readings.map((r) => r.value);
    const plot = new uPlot(
      {
        width: Math.max(240, el.clientWidth),
        height: 200,
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true } },
        axes: [
          {
            stroke: '#57606a',
            values: (_u, splits, _axis, _space, increment) => timeTicks(splits, increment),
          },
          { stroke: '#57606a', label: props.unit, size: 56 },
        ],
        series: [{}, { label: props.label, stroke: '#0b57d0', width: 2, fill: 'rgba(11, 87, 208, 0.08)' }],
      },
      [xs, ys],
      el,
    );
    const resize = new ResizeObserver(() =>
      plot.setSize({ width: Math.max(240, el.clientWidth), height: 200 }),
    );
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [props.readings, props.unit, props.label]);
  return (
    <div
      class="chart"
      ref={box}
      role="img"
      aria-label={`Chart of ${props.label}, ${props.readings.length} points`}
    />
  );
}
