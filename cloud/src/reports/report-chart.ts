/**
 * A channel's chart of the period, drawn with pdfkit as vector paths: the series as a line (gaps left
 * open), the operating band of each enabled rule segment shaded, excursions marked, local-time date
 * ticks and value ticks with the unit. The series is first reduced to at most two points (the min and
 * the max, in the order they came) per column of the plot, so a month of 1-minute readings draws as a
 * path of about a thousand points and the file stays small.
 */
import { DateTime } from 'luxon';
import type { ReportText } from './report-i18n.ts';
import { localDayBounds } from './report-stats.ts';
import type { ReportSeries } from './report-input.ts';

/** A reduced series: x in microseconds, y the value; a NaN y breaks the line (a gap). */
export interface Trace {
  x: Float64Array;
  y: Float64Array;
}

/**
 * Reduces a series to at most two points per column of `[from, to)` split into `columns`: each column's
 * minimum and maximum in the order they occurred, at the column's middle. A pause between two readings
 * longer than `gapUs` flushes the column and breaks the line.
 */
export function downsample(
  series: ReportSeries,
  from: number,
  to: number,
  columns: number,
  gapUs: number,
): Trace {
  const { ts, values } = series;
  const n = ts.length;
  const xs: number[] = [];
  const ys: number[] = [];
  const span = Math.max(1, to - from);
  const colUs = span / columns;
  let col = -1;
  let lo = 0;
  let hi = 0;
  let loFirst = true;
  let prevT = -Infinity;

  const flush = (): void => {
    if (col < 0) return;
    const x = from + (col + 0.5) * colUs;
    if (lo === hi) {
      xs.push(x);
      ys.push(lo);
    } else {
      xs.push(x, x);
      ys.push(loFirst ? lo : hi, loFirst ? hi : lo);
    }
  };

  for (let i = 0; i < n; i++) {
    const t = ts[i]!;
    const v = values[i]!;
    let c = Math.floor((t - from) / colUs);
    if (c < 0) c = 0;
    if (c >= columns) c = columns - 1;
    const gap = gapUs > 0 && t - prevT > gapUs && prevT !== -Infinity;
    if (gap || c !== col) {
      flush();
      if (gap) {
        xs.push(t);
        ys.push(NaN);
      }
      col = c;
      lo = v;
      hi = v;
      loFirst = true;
    } else if (v < lo) {
      lo = v;
      loFirst = false;
    } else if (v > hi) {
      hi = v;
      if (lo !== v) loFirst = true;
    }
    prevT = t;
  }
  flush();
  return { x: Float64Array.from(xs), y: Float64Array.from(ys) };
}

/** Local times at every `stepHours` hours of the local day (00:00, 03:00, ...) within `[from, to]`. */
export function localHourTicks(from: number, to: number, timezone: string, stepHours: number): number[] {
  const ticks: number[] = [];
  for (const day of localDayBounds(from, to, timezone)) {
    const midnight = DateTime.fromMillis(day / 1000, { zone: timezone });
    for (let hour = 0; hour < 24; hour += stepHours) {
      // An hour skipped by a daylight-saving change moves forward; a repeated one is taken once.
      const t = midnight.set({ hour }).toMillis() * 1000;
      if (t >= from && t <= to && ticks[ticks.length - 1] !== t) ticks.push(t);
    }
  }
  return ticks;
}

/** Round tick values covering `[min, max]`: steps of 1, 2 or 5 times a power of ten. */
export function niceTicks(min: number, max: number, maxTicks = 6): number[] {
  if (!(max > min)) return [min];
  const rough = (max - min) / maxTicks;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= rough) ?? power * 10;
  const ticks: number[] = [];
  for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9; v += step) {
    ticks.push(Math.round(v / step) * step);
  }
  return ticks;
}

export interface ChartBand {
  from: number;
  to: number;
  min: number;
  max: number;
}

export interface ChartSpec {
  from: number;
  to: number;
  trace: Trace;
  /** The value range of the data (null without data). */
  dataMin: number | null;
  dataMax: number | null;
  bands: ChartBand[];
  excursions: Array<{ from: number; to: number }>;
  unit: string;
  decimals: number;
}

const COLORS = {
  axis: '#444444',
  grid: '#dddddd',
  band: '#d8f0d8',
  bandEdge: '#6aa86a',
  excursion: '#f3c4c4',
  excursionMark: '#c62828',
  line: '#1f4e9a',
  text: '#222222',
};

const FONT_SIZE = 7;
const LEFT_AXIS = 42;
const BOTTOM_AXIS = 16;
const TOP_PAD = 18;

/** The columns a chart of this width reduces its series to: two points per PDF unit at most. */
export function chartColumns(width: number): number {
  return Math.max(10, Math.round(width - LEFT_AXIS));
}

/** Draws the chart into the box `(x, y, width, height)` of the current page. */
export function drawChart(
  doc: PDFKit.PDFDocument,
  box: { x: number; y: number; width: number; height: number },
  spec: ChartSpec,
  text: ReportText,
  fonts: { regular: string; bold: string },
): void {
  const plotX = box.x + LEFT_AXIS;
  const plotY = box.y + TOP_PAD;
  const plotW = box.width - LEFT_AXIS;
  const plotH = box.height - TOP_PAD - BOTTOM_AXIS;
  const span = Math.max(1, spec.to - spec.from);

  let lo = spec.dataMin ?? Infinity;
  let hi = spec.dataMax ?? -Infinity;
  for (const band of spec.bands) {
    lo = Math.min(lo, band.min);
    hi = Math.max(hi, band.max);
  }
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) {
    lo = 0;
    hi = 1;
  }
  if (hi - lo < 1e-9) {
    lo -= 1;
    hi += 1;
  }
  const pad = (hi - lo) * 0.06;
  const ticks = niceTicks(lo - pad, hi + pad);
  const yLo = Math.min(lo - pad, ticks[0]!);
  const yHi = Math.max(hi + pad, ticks[ticks.length - 1]!);
  const xOf = (t: number): number => plotX + ((t - spec.from) / span) * plotW;
  const yOf = (v: number): number => plotY + plotH - ((v - yLo) / (yHi - yLo)) * plotH;
  const clampX = (t: number): number => xOf(Math.min(spec.to, Math.max(spec.from, t)));

  doc.save();
  // The operating band of each enabled rule segment.
  for (const band of spec.bands) {
    const x0 = clampX(band.from);
    const x1 = clampX(band.to);
    if (x1 <= x0) continue;
    doc.rect(x0, yOf(band.max), x1 - x0, yOf(band.min) - yOf(band.max)).fill(COLORS.band);
    doc.lineWidth(0.4).strokeColor(COLORS.bandEdge);
    doc.moveTo(x0, yOf(band.max)).lineTo(x1, yOf(band.max)).stroke();
    doc.moveTo(x0, yOf(band.min)).lineTo(x1, yOf(band.min)).stroke();
  }
  // Excursions: the time they last, shaded over the whole height, merged when closer than a unit.
  let markFrom = -1;
  let markTo = -1;
  const marks: Array<[number, number]> = [];
  for (const e of spec.excursions) {
    const x0 = clampX(e.from);
    const x1 = Math.max(clampX(e.to), x0 + 0.8);
    if (markTo >= 0 && x0 <= markTo + 1) {
      markTo = Math.max(markTo, x1);
    } else {
      if (markTo >= 0) marks.push([markFrom, markTo]);
      markFrom = x0;
      markTo = x1;
    }
  }
  if (markTo >= 0) marks.push([markFrom, markTo]);
  for (const [x0, x1] of marks) {
    doc.rect(x0, plotY, x1 - x0, plotH).fill(COLORS.excursion);
    doc.rect(x0, plotY + plotH - 3, x1 - x0, 3).fill(COLORS.excursionMark);
    const mid = (x0 + x1) / 2;
    doc.polygon([mid - 3, plotY - 5], [mid + 3, plotY - 5], [mid, plotY]).fill(COLORS.excursionMark);
  }

  // Value grid and ticks.
  doc.font(fonts.regular).fontSize(FONT_SIZE).fillColor(COLORS.text);
  doc.lineWidth(0.3).strokeColor(COLORS.grid);
  for (const v of ticks) {
    const y = yOf(v);
    doc
      .moveTo(plotX, y)
      .lineTo(plotX + plotW, y)
      .stroke();
    doc.text(text.number(v, spec.decimals), box.x, y - FONT_SIZE / 2 - 1, {
      width: LEFT_AXIS - 4,
      align: 'right',
    });
  }
  doc.text(spec.unit, box.x, box.y, { width: LEFT_AXIS - 4, align: 'right' });

  // Time ticks at local midnights (or local hours for a short period).
  const days = localDayBounds(spec.from, spec.to, text.timezone).filter(
    (t) => t >= spec.from && t <= spec.to,
  );
  const dayCount = span / 86_400_000_000;
  if (dayCount > 2) {
    const labelEvery = Math.max(1, Math.ceil(dayCount / 10));
    // A grid line per day up to two months; beyond, only at the labelled days.
    const gridEvery = dayCount > 62 ? labelEvery : 1;
    days.forEach((t, i) => {
      const x = xOf(t);
      if (i % gridEvery === 0) {
        doc.lineWidth(0.3).strokeColor(COLORS.grid);
        doc
          .moveTo(x, plotY)
          .lineTo(x, plotY + plotH)
          .stroke();
      }
      if (i % labelEvery === 0 && x < plotX + plotW - 10) {
        doc.fillColor(COLORS.text).text(text.dayMonth(t), x - 20, plotY + plotH + 3, {
          width: 40,
          align: 'center',
        });
      }
    });
  } else {
    for (const t of localHourTicks(spec.from, spec.to, text.timezone, dayCount > 1 ? 6 : 3)) {
      const x = xOf(t);
      doc.lineWidth(0.3).strokeColor(COLORS.grid);
      doc
        .moveTo(x, plotY)
        .lineTo(x, plotY + plotH)
        .stroke();
      doc.fillColor(COLORS.text).text(text.time(t), x - 20, plotY + plotH + 3, {
        width: 40,
        align: 'center',
      });
    }
  }

  // The line, broken at gaps.
  const { x: xs, y: ys } = spec.trace;
  doc.lineWidth(0.7).strokeColor(COLORS.line).lineJoin('round');
  let penDown = false;
  let drawn = 0;
  for (let i = 0; i < xs.length; i++) {
    const v = ys[i]!;
    if (Number.isNaN(v)) {
      penDown = false;
      continue;
    }
    const px = xOf(xs[i]!);
    const py = yOf(v);
    if (penDown) {
      doc.lineTo(px, py);
    } else {
      // A lone point between two gaps still shows, as a short tick.
      doc.moveTo(px, py).lineTo(px + 0.5, py);
      penDown = true;
    }
    drawn++;
  }
  if (drawn > 0) doc.stroke();

  // Axes.
  doc.lineWidth(0.6).strokeColor(COLORS.axis);
  doc
    .moveTo(plotX, plotY)
    .lineTo(plotX, plotY + plotH)
    .lineTo(plotX + plotW, plotY + plotH)
    .stroke();
  doc.restore();
}
