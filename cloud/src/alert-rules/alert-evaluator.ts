import { MICROS_PER_MINUTE } from '../../../shared/time.ts';
import { firstActive, type Schedule } from './alert-schedule.ts';

/**
 * The alert-rule evaluator as pure functions (docs/design/alert-rules.md). `step(state, sample)`
 * folds one measurement (in measurement time) into the state of one (rule, channel) and answers
 * the excursions it closed; `finish(state, now)` answers those still open. An excursion becomes an
 * alarm event by `alertOf` once its delay has passed inside the rule's schedule. Nothing here
 * depends on arrival order: the engine feeds samples sorted by `ts` from a saved state
 * (`alert-channel.ts`), re-deriving from an earlier checkpoint when late data arrives.
 *
 * Definitions:
 * - A measurement is judged by the rule version in force at its `ts` (`versions`, sorted by
 *   `validFrom`); measurements before the first version are ignored. A version change ends every
 *   open excursion at the change.
 * - above v: starts with a value > v, continues while value > v − hysteresis.
 *   below v: starts with a value < v, continues while value < v + hysteresis.
 *   outside [min, max]: starts outside, continues while value > max − h or value < min + h.
 *   rate_of_change: the change against the samples of the last `within_min` minutes (rise: over
 *   their lowest; fall: under their highest; any: the larger) starts it when more than `change`,
 *   continues it while more than `change − hysteresis`.
 *   An excursion ends at the first sample that no longer continues it.
 * - no_data: a gap of more than `minutes` after a sample (or after the version began, if no
 *   sample came yet); it starts at that sample and ends at the next one.
 * - The alarm moment is the first moment at or after start + delay (no_data: start + minutes) and
 *   before the end at which the schedule is active; no such moment up to now: no event (yet).
 */

export type Severity = 'warning' | 'critical';
export type RateDirection = 'rise' | 'fall' | 'any';

export type Condition =
  | { type: 'above'; value: number; hysteresis: number; delay_min: number; severity: Severity }
  | { type: 'below'; value: number; hysteresis: number; delay_min: number; severity: Severity }
  | {
      type: 'outside';
      min: number;
      max: number;
      hysteresis: number;
      delay_min: number;
      severity: Severity;
    }
  | { type: 'no_data'; minutes: number; severity: Severity }
  | {
      type: 'rate_of_change';
      change: number;
      within_min: number;
      direction: RateDirection;
      hysteresis: number;
      delay_min: number;
      severity: Severity;
    };

export type AlertKind = 'threshold_high' | 'threshold_low' | 'no_data' | 'rate_of_change';

/** A rule as in force from `validFrom` on; `conditions` null: the rule does not apply then. */
export interface Version {
  validFrom: number;
  conditions: Condition[] | null;
  schedule: Schedule | null;
}

export interface Sample {
  ts: number;
  value: number;
}

/** A value or rate excursion still running. */
export interface Run {
  kind: AlertKind;
  start: number;
  peak: number;
}

/** The state of one (rule, channel) after the sample at `lastTs`: a function of the samples alone. */
export interface State {
  /** The version in force at the newest sample folded (or the first version). */
  versionFrom: number;
  /** The newest sample of this version; null: none yet. */
  lastTs: number | null;
  /** Samples within the longest rate window, oldest first (for rate_of_change). */
  recent: Sample[];
  /** Per condition of the version: the excursion running, if any. */
  runs: (Run | null)[];
}

export interface Excursion {
  versionFrom: number;
  cond: number;
  kind: AlertKind;
  start: number;
  /** Exclusive; null: still on. */
  end: number | null;
  peak: number | null;
  /** The earliest alarm moment (start + delay). */
  armAt: number;
}

/** An alarm event as derived; identity: (versionFrom, cond, startedAt). */
export interface DerivedAlert {
  versionFrom: number;
  cond: number;
  kind: AlertKind;
  severity: Severity;
  startedAt: number;
  alarmAt: number;
  endedAt: number | null;
  peak: number | null;
}

export function initialState(versions: readonly Version[]): State {
  const first = versions[0];
  if (!first) throw new Error('an alert rule has at least one version');
  return { versionFrom: first.validFrom, lastTs: null, recent: [], runs: [] };
}

/** The position of a state in measurement time: samples after it are still to be folded. */
export function positionOf(s: State): number {
  return s.lastTs ?? s.versionFrom - 1;
}

function versionIndexAt(versions: readonly Version[], ts: number): number {
  let i = -1;
  for (let k = 0; k < versions.length && versions[k]!.validFrom <= ts; k++) i = k;
  return i;
}

function versionOf(versions: readonly Version[], from: number): Version {
  const v = versions.find((x) => x.validFrom === from);
  if (!v) throw new Error(`no alert rule version from ${from}`);
  return v;
}

const minutes = (m: number) => m * MICROS_PER_MINUTE;

function delayOf(c: Condition): number {
  return c.type === 'no_data' ? minutes(c.minutes) : minutes(c.delay_min);
}

function longestRateWindow(conditions: readonly Condition[] | null): number {
  let w = 0;
  for (const c of conditions ?? []) if (c.type === 'rate_of_change') w = Math.max(w, minutes(c.within_min));
  return w;
}

/** The no_data gaps of a version from `gapStart` to `end` (exclusive; null: still open). */
function gaps(v: Version, gapStart: number, end: number | null): Excursion[] {
  const out: Excursion[] = [];
  (v.conditions ?? []).forEach((c, cond) => {
    if (c.type !== 'no_data') return;
    const armAt = gapStart + delayOf(c);
    if (end !== null && armAt >= end) return;
    out.push({ versionFrom: v.validFrom, cond, kind: 'no_data', start: gapStart, end, peak: null, armAt });
  });
  return out;
}

/** Ends the state's version at `boundary`: its open runs and its gap close there. */
function closeVersion(s: State, v: Version, boundary: number): Excursion[] {
  const out: Excursion[] = [];
  s.runs.forEach((r, cond) => {
    if (!r) return;
    const c = v.conditions![cond]!;
    out.push({ versionFrom: v.validFrom, cond, ...r, end: boundary, armAt: r.start + delayOf(c) });
  });
  out.push(...gaps(v, s.lastTs ?? v.validFrom, boundary));
  return out;
}

/**
 * Moves the state into the version in force at `ts`, closing what the versions in between ended.
 * Answers the new state and the excursions closed.
 */
function enterVersionAt(
  s: State,
  versions: readonly Version[],
  ts: number,
): { s: State; closed: Excursion[] } {
  const target = versionIndexAt(versions, ts);
  let current = versions.findIndex((v) => v.validFrom === s.versionFrom);
  const closed: Excursion[] = [];
  let state = s;
  while (current < target) {
    const next = versions[current + 1]!;
    closed.push(...closeVersion(state, versions[current]!, next.validFrom));
    state = { versionFrom: next.validFrom, lastTs: null, recent: [], runs: [] };
    current++;
  }
  return { s: state, closed };
}

/** How far a sample is out for a condition: starts/continues an excursion, and its kind and peak value. */
function judge(
  c: Exclude<Condition, { type: 'no_data' }>,
  sample: Sample,
  recent: readonly Sample[],
  run: Run | null,
): { on: boolean; kind: AlertKind; measure: number } {
  const h = run ? c.hysteresis : 0;
  const v = sample.value;
  switch (c.type) {
    case 'above':
      return { on: v > c.value - h, kind: 'threshold_high', measure: v };
    case 'below':
      return { on: v < c.value + h, kind: 'threshold_low', measure: v };
    case 'outside': {
      const high = v > c.max - h;
      const low = v < c.min + h;
      const kind = run ? run.kind : v > c.max ? 'threshold_high' : 'threshold_low';
      return { on: high || low, kind, measure: v };
    }
    case 'rate_of_change': {
      const from = sample.ts - minutes(c.within_min);
      let lo = Infinity;
      let hi = -Infinity;
      for (const r of recent) {
        if (r.ts < from || r.ts >= sample.ts) continue;
        lo = Math.min(lo, r.value);
        hi = Math.max(hi, r.value);
      }
      const rise = lo === Infinity ? 0 : v - lo;
      const fall = hi === -Infinity ? 0 : hi - v;
      const measure = c.direction === 'rise' ? rise : c.direction === 'fall' ? fall : Math.max(rise, fall);
      return { on: measure > c.change - h, kind: 'rate_of_change', measure };
    }
  }
}

/** The new peak of a run: the most extreme value (highest above, lowest below, largest change). */
function peakOf(c: Condition, kind: AlertKind, peak: number, measure: number): number {
  if (c.type === 'below' || (c.type === 'outside' && kind === 'threshold_low'))
    return Math.min(peak, measure);
  if (c.type === 'outside') return Math.max(peak, measure);
  return Math.max(peak, measure);
}

/** Folds one sample (newer than `positionOf(s)`) into the state; answers the excursions it closed. */
export function step(
  s: State,
  versions: readonly Version[],
  sample: Sample,
): { state: State; closed: Excursion[] } {
  if (versionIndexAt(versions, sample.ts) < 0) return { state: s, closed: [] };
  const entered = enterVersionAt(s, versions, sample.ts);
  const closed = entered.closed;
  const before = entered.s;
  const v = versionOf(versions, before.versionFrom);
  if (!v.conditions) return { state: { ...before, lastTs: sample.ts }, closed };

  closed.push(...gaps(v, before.lastTs ?? v.validFrom, sample.ts));
  const runs: (Run | null)[] = [];
  v.conditions.forEach((c, cond) => {
    const run = before.runs[cond] ?? null;
    if (c.type === 'no_data') {
      runs.push(null);
      return;
    }
    const j = judge(c, sample, before.recent, run);
    if (run && j.on) runs.push({ ...run, peak: peakOf(c, run.kind, run.peak, j.measure) });
    else if (run) {
      closed.push({ versionFrom: v.validFrom, cond, ...run, end: sample.ts, armAt: run.start + delayOf(c) });
      runs.push(null);
    } else if (j.on) runs.push({ kind: j.kind, start: sample.ts, peak: j.measure });
    else runs.push(null);
  });
  const window = longestRateWindow(v.conditions);
  const recent = window > 0 ? [...before.recent.filter((r) => r.ts >= sample.ts - window), sample] : [];
  return { state: { versionFrom: v.validFrom, lastTs: sample.ts, recent, runs }, closed };
}

/** Folds samples sorted by `ts`. */
export function fold(
  s: State,
  versions: readonly Version[],
  samples: readonly Sample[],
): { state: State; closed: Excursion[] } {
  let state = s;
  const closed: Excursion[] = [];
  for (const sample of samples) {
    const r = step(state, versions, sample);
    state = r.state;
    closed.push(...r.closed);
  }
  return { state, closed };
}

/** What is still open at `now`: versions begun since the state's version close it first. */
export function finish(s: State, versions: readonly Version[], now: number): Excursion[] {
  const { s: state, closed } = enterVersionAt(s, versions, now);
  const v = versionOf(versions, state.versionFrom);
  const open: Excursion[] = [...closed];
  if (!v.conditions) return open;
  state.runs.forEach((r, cond) => {
    if (!r) return;
    open.push({
      versionFrom: v.validFrom,
      cond,
      ...r,
      end: null,
      armAt: r.start + delayOf(v.conditions![cond]!),
    });
  });
  open.push(...gaps(v, state.lastTs ?? v.validFrom, null));
  return open;
}

/** The alarm event of an excursion as of `now`, or null while (or if) it has none. */
export function alertOf(x: Excursion, versions: readonly Version[], now: number): DerivedAlert | null {
  const v = versionOf(versions, x.versionFrom);
  const c = v.conditions![x.cond]!;
  const until = x.end === null ? now + 1 : Math.min(x.end, now + 1);
  const alarmAt = firstActive(v.schedule, x.armAt, until);
  if (alarmAt === null) return null;
  return {
    versionFrom: x.versionFrom,
    cond: x.cond,
    kind: x.kind,
    severity: c.severity,
    startedAt: x.start,
    alarmAt,
    endedAt: x.end,
    peak: x.peak,
  };
}

/** When an open excursion without an event will have one if nothing changes (for the tick). */
export function dueOf(open: readonly Excursion[], versions: readonly Version[], now: number): number | null {
  let due: number | null = null;
  for (const x of open) {
    if (x.end !== null) continue;
    const v = versionOf(versions, x.versionFrom);
    if (alertOf(x, versions, now) !== null) continue;
    const t = firstActive(v.schedule, Math.max(x.armAt, now + 1), Infinity);
    if (t !== null) due = due === null ? t : Math.min(due, t);
  }
  return due;
}

/** Every alarm event of a series (sorted by `ts`) from the rule's beginning, as of `now`. */
export function deriveAlerts(
  versions: readonly Version[],
  samples: readonly Sample[],
  now: number,
): DerivedAlert[] {
  const { state, closed } = fold(initialState(versions), versions, samples);
  return [...closed, ...finish(state, versions, now)].flatMap((x) => {
    const a = alertOf(x, versions, now);
    return a ? [a] : [];
  });
}
