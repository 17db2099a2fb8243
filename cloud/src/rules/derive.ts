import { graceMicros, noDataMicros, type Rule, type RuleTimeline } from './timeline.ts';

/**
 * The rule engine's one definition of what happened to a channel, as a pure function of its stored
 * measurements (in measurement time, whatever order they arrived in), the rules in force and "now".
 * Because nothing here depends on arrival order, late, out-of-order and replayed data give the same
 * events; the database's uniqueness per (channel, kind, started_at) makes writing them idempotent.
 *
 * Definitions (docs/api/rules.md, and docs/design/rules.md):
 * - A sample is judged by the rule in force at its `ts`: above `ok_max` is high, below `ok_min` low,
 *   otherwise ok; under a disabled rule it is "off" (no judgement).
 * - An excursion is a run of consecutive high (or low) samples. It starts at its first sample and
 *   ends at the first sample that is not of its kind (back in range, the other side, or off), or
 *   when the rule is disabled. Until then it is taken to continue, even without new samples.
 * - It is an alarm (`threshold_high`/`threshold_low`) once it has lasted `grace_min` of the rule in
 *   force at its start: `alarm_at = started_at + grace`, at once when grace is 0.
 * - No data: no sample for `no_data_min` minutes while the rule is enabled. The event starts
 *   `no_data_min` after the last sample and ends at the next sample (or when the rule is disabled).
 */
export type ThresholdKind = 'threshold_high' | 'threshold_low';
export type EventKind = ThresholdKind | 'no_data';
export type SensorState = 'ok' | 'grace' | 'alarm' | 'silent' | 'no_data';

export interface Sample {
  ts: number;
  value: number;
}

/** An excursion still running at the newest sample. */
export interface Run {
  kind: ThresholdKind;
  start: number;
  peak: number;
}

/** Where a derivation starts: after the sample at `lastTs`, with the excursion open there, if any. */
export interface Seed {
  lastTs: number | null;
  run: Run | null;
}

export interface DerivedEvent {
  kind: EventKind;
  startedAt: number;
  alarmAt: number;
  /** null while open */
  endedAt: number | null;
  /** highest value of a high excursion, lowest of a low one; null for no data */
  peak: number | null;
  okMin: number;
  okMax: number;
}

export interface Derivation {
  events: DerivedEvent[];
  /** The state after the newest sample, independent of "now": the seed of the next derivation. */
  tail: Seed;
}

export function judge(value: number, rule: Rule): ThresholdKind | 'ok' | 'off' {
  if (!rule.enabled) return 'off';
  if (value > rule.okMax) return 'threshold_high';
  if (value < rule.okMin) return 'threshold_low';
  return 'ok';
}

/**
 * Events of the samples after `seed` (ascending `ts`, all after `seed.lastTs`), up to `now`.
 * Events that started before the seed are not repeated, except the seeded excursion's own.
 */
export function derive(
  seed: Seed,
  samples: readonly Sample[],
  timeline: RuleTimeline,
  now: number,
): Derivation {
  const events: DerivedEvent[] = [];
  let run: Run | null = seed.run ? { ...seed.run } : null;
  let lastTs = seed.lastTs;

  const runEvent = (r: Run, endedAt: number | null): DerivedEvent => {
    const rule = timeline.at(r.start);
    return {
      kind: r.kind,
      startedAt: r.start,
      alarmAt: r.start + graceMicros(rule),
      endedAt,
      peak: r.peak,
      okMin: rule.okMin,
      okMax: rule.okMax,
    };
  };
  // An excursion back in range exactly when its grace ends is an alarm of no length: recorded (a
  // tick may have announced it before that sample came), and told (`dueNotifications`).
  const closeRun = (r: Run, end: number) => {
    const event = runEvent(r, end);
    if (end >= event.alarmAt) events.push(event);
  };
  /** No-data events in the stretch without samples from `after` to `until` (open when `open`). */
  const gap = (after: number, until: number, open: boolean) => {
    for (const interval of timeline.enabledIntervals(after, until)) {
      const startedAt = Math.max(after + noDataMicros(interval.rule), interval.start);
      const isOpen = open && interval.end === until;
      if (isOpen ? startedAt > until : startedAt >= interval.end) continue;
      events.push({
        kind: 'no_data',
        startedAt,
        alarmAt: startedAt,
        endedAt: isOpen ? null : interval.end,
        peak: null,
        okMin: interval.rule.okMin,
        okMax: interval.rule.okMax,
      });
    }
  };

  for (const s of samples) {
    if (lastTs !== null) {
      gap(lastTs, s.ts, false);
      if (run) {
        const cut = timeline.firstDisabledAfter(lastTs, s.ts);
        if (cut !== null && cut < s.ts) {
          closeRun(run, cut);
          run = null;
        }
      }
    }
    const verdict = judge(s.value, timeline.at(s.ts));
    if (run && run.kind !== verdict) {
      closeRun(run, s.ts);
      run = null;
    }
    if (verdict === 'threshold_high' || verdict === 'threshold_low') {
      if (run)
        run.peak = verdict === 'threshold_high' ? Math.max(run.peak, s.value) : Math.min(run.peak, s.value);
      else run = { kind: verdict, start: s.ts, peak: s.value };
    }
    lastTs = s.ts;
  }

  // The provisional part, which depends on "now": the open excursion and the silence since the newest sample.
  if (lastTs !== null && now > lastTs) gap(lastTs, now, true);
  if (run && lastTs !== null) {
    const cut = timeline.firstDisabledAfter(lastTs, now);
    if (cut !== null) closeRun(run, cut);
    else {
      const event = runEvent(run, null);
      if (now >= event.alarmAt) events.push(event);
    }
  }
  return { events, tail: { lastTs, run } };
}

export interface Interval {
  from: number;
  to: number;
}

export function covered(ts: number, windows: readonly Interval[]): boolean {
  return windows.some((w) => w.from <= ts && ts < w.to);
}

/** The first moment in [from, to] that no window covers, or null when they cover all of it. */
export function firstUncovered(from: number, to: number, windows: readonly Interval[]): number | null {
  let t = from;
  for (;;) {
    const w = windows.find((x) => x.from <= t && t < x.to);
    if (!w) return t <= to ? t : null;
    t = w.to;
    if (t > to) return null;
  }
}

/** The sensor state at `now`, first match wins (docs/api/rules.md). */
export function stateAt(
  tail: Seed,
  timeline: RuleTimeline,
  silences: readonly Interval[],
  now: number,
): SensorState {
  const rule = timeline.at(now);
  if (tail.lastTs === null || now - tail.lastTs >= noDataMicros(rule)) return 'no_data';
  if (!rule.enabled || covered(now, silences)) return 'silent';
  const run = tail.run;
  if (run && timeline.firstDisabledAfter(tail.lastTs, now) === null) {
    return now >= run.start + graceMicros(timeline.at(run.start)) ? 'alarm' : 'grace';
  }
  return 'ok';
}

/** The next moment after `now` at which the state or the events can change without new data. */
export function nextDue(
  tail: Seed,
  timeline: RuleTimeline,
  silences: readonly Interval[],
  now: number,
): number | null {
  const candidates: number[] = [];
  if (tail.lastTs !== null) {
    candidates.push(tail.lastTs + noDataMicros(timeline.at(tail.lastTs)));
    candidates.push(tail.lastTs + noDataMicros(timeline.at(now)));
    if (tail.run) candidates.push(tail.run.start + graceMicros(timeline.at(tail.run.start)));
  }
  const boundary = timeline.nextBoundaryAfter(now);
  if (boundary !== null) candidates.push(boundary);
  for (const w of silences) candidates.push(w.from, w.to);
  const future = candidates.filter((t) => t > now);
  return future.length ? Math.min(...future) : null;
}
