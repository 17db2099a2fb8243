/**
 * The statistics a report prints for one channel, computed from its series in single passes over the
 * typed arrays: min / mean / max, readings, coverage against the channel's usual interval, time in
 * range under the rule segment in force at each reading, excursions, and one row per local day in the
 * site's time zone. Pure functions: no clock, no I/O.
 */
import { DateTime } from 'luxon';
import type { ReportAlarm, ReportChannel, ReportInput, ReportSeries, RuleSegment } from './report-input.ts';

const US_PER_MS = 1000;
const US_PER_MINUTE = 60_000_000;
/** A pause longer than this many usual intervals is a gap: no line is drawn across it, no excursion spans it. */
export const GAP_FACTOR = 3;

export interface Excursion {
  /** The first out-of-range reading. */
  from: number;
  /** The end of the last out-of-range reading's interval. */
  to: number;
  readings: number;
  /** The reading farthest outside the range. */
  peak: number;
}

export interface DayStats {
  /** The local midnight that starts the day, in microseconds, and the next one. */
  from: number;
  to: number;
  /** The local date, `yyyy-MM-dd`. */
  isoDate: string;
  /** 24, or 23 / 25 on a day with a daylight-saving change. */
  hours: number;
  readings: number;
  min: number | null;
  mean: number | null;
  max: number | null;
  minutesOutOfRange: number;
}

export interface ChannelStats {
  readings: number;
  min: number | null;
  mean: number | null;
  max: number | null;
  /** The median interval between readings, microseconds; null with fewer than two readings. */
  usualIntervalUs: number | null;
  /** The window the channel belonged to the site within the period. */
  windowFrom: number;
  windowTo: number;
  expectedReadings: number | null;
  coveragePct: number | null;
  /** Readings judged by an enabled rule, and the share of their time within the range. */
  judgedReadings: number;
  timeInRangePct: number | null;
  minutesOutOfRange: number;
  excursions: Excursion[];
  alarms: number;
  alarmsNotAcknowledged: number;
  days: DayStats[];
}

/** The median of the intervals between consecutive timestamps, or null with fewer than two. */
export function usualInterval(ts: Float64Array): number | null {
  const n = ts.length;
  if (n < 2) return null;
  const diffs = new Float64Array(n - 1);
  for (let i = 1; i < n; i++) diffs[i - 1] = ts[i]! - ts[i - 1]!;
  diffs.sort();
  const mid = diffs.length >> 1;
  const median = diffs.length % 2 === 1 ? diffs[mid]! : (diffs[mid - 1]! + diffs[mid]!) / 2;
  return median > 0 ? median : null;
}

/**
 * The local midnights from the one at or before `from` to the first at or after `to`, in microseconds:
 * day `i` is `[bounds[i], bounds[i + 1])`, 23 or 25 hours long across a daylight-saving change.
 */
export function localDayBounds(from: number, to: number, timezone: string): number[] {
  let day = DateTime.fromMillis(Math.floor(from / US_PER_MS), { zone: timezone }).startOf('day');
  const bounds = [day.toMillis() * US_PER_MS];
  while (bounds[bounds.length - 1]! < to) {
    // Again to the day's start: where a change skips midnight itself, that day starts at 01:00,
    // and a plain day later would keep every following day at 01:00 too.
    day = day.plus({ days: 1 }).startOf('day');
    bounds.push(day.toMillis() * US_PER_MS);
  }
  return bounds;
}

/**
 * The part of the period during which the channel's device belonged to the site: it starts at a move
 * into the site, ends at a move out of it or at the device's deletion.
 */
export function presenceWindow(input: ReportInput, channel: ReportChannel): { from: number; to: number } {
  let from = input.report.from;
  let to = input.report.to;
  if (channel.deviceDeletedAt !== null) to = Math.min(to, channel.deviceDeletedAt);
  for (const move of input.moves) {
    if (move.deviceId !== channel.deviceId) continue;
    if (move.toSiteId === input.site.id && move.fromSiteId !== input.site.id) {
      from = Math.max(from, move.effectiveAt);
    } else if (move.fromSiteId === input.site.id && move.toSiteId !== input.site.id) {
      to = Math.min(to, move.effectiveAt);
    }
  }
  return { from, to: Math.max(from, to) };
}

/** The rule segments that are in force at some time of `[from, to)`, each with its own end. */
export function segmentsInForce(
  rules: RuleSegment[],
  from: number,
  to: number,
): Array<RuleSegment & { to: number }> {
  const sorted = [...rules].sort((a, b) => a.from - b.from);
  const out: Array<RuleSegment & { to: number }> = [];
  for (let i = 0; i < sorted.length; i++) {
    const seg = sorted[i]!;
    const end = sorted[i + 1]?.from ?? Infinity;
    if (end > from && seg.from < to) out.push({ ...seg, to: end });
  }
  return out;
}

export interface StatsOptions {
  timezone: string;
  /** The period. */
  from: number;
  to: number;
  /** The part of the period the channel belonged to the site (defaults to the period). */
  windowFrom?: number;
  windowTo?: number;
  rules: RuleSegment[];
  /** The channel's alarm events. */
  alarms?: ReportAlarm[];
}

/**
 * Everything the report prints about one channel. Each reading stands for the time until the next
 * one, at most `GAP_FACTOR` usual intervals (the last one: one usual interval, within the window);
 * time in range and minutes out of range are sums of these durations, so irregular sampling is
 * weighted by time. A reading is judged by the rule segment in force at its timestamp; a disabled
 * rule, or none, leaves it unjudged.
 */
export function channelStats(series: ReportSeries, options: StatsOptions): ChannelStats {
  const { ts, values } = series;
  const n = ts.length;
  const windowFrom = options.windowFrom ?? options.from;
  const windowTo = options.windowTo ?? options.to;
  const interval = usualInterval(ts);
  const gapLimit = interval === null ? 0 : interval * GAP_FACTOR;

  const bounds = localDayBounds(options.from, options.to, options.timezone);
  const dayCount = bounds.length - 1;
  const dayReadings = new Float64Array(dayCount);
  const daySum = new Float64Array(dayCount);
  const dayMin = new Float64Array(dayCount).fill(Infinity);
  const dayMax = new Float64Array(dayCount).fill(-Infinity);
  const dayOutUs = new Float64Array(dayCount);

  const segments = [...options.rules].sort((a, b) => a.from - b.from);
  let segIndex = -1;
  let day = 0;

  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  let judged = 0;
  let judgedUs = 0;
  let inRangeUs = 0;
  let outUs = 0;
  const excursions: Excursion[] = [];
  let open: Excursion | null = null;

  for (let i = 0; i < n; i++) {
    const t = ts[i]!;
    const v = values[i]!;
    if (v < min) min = v;
    if (v > max) max = v;
    sum += v;

    while (day < dayCount - 1 && t >= bounds[day + 1]!) day++;
    dayReadings[day]!++;
    daySum[day]! += v;
    if (v < dayMin[day]!) dayMin[day] = v;
    if (v > dayMax[day]!) dayMax[day] = v;

    // The time this reading stands for.
    let weight: number;
    let gapAfter = false;
    if (interval === null) {
      weight = 1;
    } else if (i + 1 < n) {
      const next = ts[i + 1]! - t;
      gapAfter = next > gapLimit;
      weight = gapAfter ? interval : next;
    } else {
      weight = Math.max(0, Math.min(interval, windowTo - t));
    }

    while (segIndex + 1 < segments.length && segments[segIndex + 1]!.from <= t) segIndex++;
    const rule = segIndex >= 0 ? segments[segIndex]! : null;
    if (rule !== null && rule.enabled) {
      judged++;
      judgedUs += weight;
      const high = v > rule.okMax;
      const low = v < rule.okMin;
      if (high || low) {
        outUs += weight;
        dayOutUs[day]! += interval === null ? 0 : weight;
        const peakDistance = high ? v - rule.okMax : rule.okMin - v;
        if (open === null) {
          open = { from: t, to: t + (interval === null ? 0 : weight), readings: 1, peak: v };
          excursions.push(open);
        } else {
          open.to = t + (interval === null ? 0 : weight);
          open.readings++;
          const openDistance = open.peak > rule.okMax ? open.peak - rule.okMax : rule.okMin - open.peak;
          if (peakDistance > openDistance) open.peak = v;
        }
      } else {
        inRangeUs += weight;
        open = null;
      }
    } else {
      open = null;
    }
    if (gapAfter) open = null;
  }

  const windowUs = Math.max(0, windowTo - windowFrom);
  const expected = interval === null ? null : Math.max(1, Math.round(windowUs / interval));
  const alarms = options.alarms ?? [];
  const days: DayStats[] = [];
  for (let d = 0; d < dayCount; d++) {
    const start = bounds[d]!;
    const end = bounds[d + 1]!;
    const count = dayReadings[d]!;
    days.push({
      from: start,
      to: end,
      isoDate: DateTime.fromMillis(start / US_PER_MS, { zone: options.timezone }).toISODate() ?? '',
      hours: Math.round((end - start) / (60 * US_PER_MINUTE)),
      readings: count,
      min: count > 0 ? dayMin[d]! : null,
      mean: count > 0 ? daySum[d]! / count : null,
      max: count > 0 ? dayMax[d]! : null,
      minutesOutOfRange: Math.round(dayOutUs[d]! / US_PER_MINUTE),
    });
  }

  return {
    readings: n,
    min: n > 0 ? min : null,
    mean: n > 0 ? sum / n : null,
    max: n > 0 ? max : null,
    usualIntervalUs: interval,
    windowFrom,
    windowTo,
    expectedReadings: expected,
    coveragePct: expected === null ? (n > 0 ? null : 0) : Math.min(100, (n / expected) * 100),
    judgedReadings: judged,
    timeInRangePct: judged === 0 ? null : judgedUs > 0 ? (inRangeUs / judgedUs) * 100 : null,
    minutesOutOfRange: Math.round(outUs / US_PER_MINUTE),
    excursions,
    alarms: alarms.length,
    alarmsNotAcknowledged: alarms.filter((a) => a.acknowledgedAt === null).length,
    days,
  };
}
