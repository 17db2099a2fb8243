import {
  alertOf,
  dueOf,
  finish,
  fold,
  initialState,
  positionOf,
  type DerivedAlert,
  type Sample,
  type State,
  type Version,
} from './alert-evaluator.ts';

/**
 * One evaluation of one (rule, channel), pure: where it starts (`planStart`), what it derives
 * (`runChannel`) and how the stored events follow (`reconcileAlerts`). The engine does the reads
 * and writes in between; the property tests run the same functions over an in-memory store.
 *
 * The tracker keeps the state at the newest folded sample and a few earlier states (checkpoints).
 * New data after the tracker continues from it; late data (at or before its position) re-derives
 * from the newest checkpoint before the earliest new sample, or from the rule's beginning. Every
 * state is a function of the samples up to its position, so the result equals a derivation of the
 * whole sorted series.
 */

export interface Tracker {
  state: State;
  /** Earlier states, oldest first, each strictly before the next. */
  checkpoints: State[];
  /** The timeline the states were derived under (`timelineOf`); absent in trackers saved before it. */
  timeline?: TimelineKey;
  /**
   * Set by the engine when an event of the pair may still be due a notification without new data
   * (a silence window holds it): the next evaluation loads such events even if older than its start.
   */
  notices?: boolean;
}

/** A timeline as its boundaries and whether the rule applies from each (versions never change). */
export type TimelineKey = [validFrom: number, applies: boolean][];

export function timelineOf(versions: readonly Version[]): TimelineKey {
  return versions.map((v) => [v.validFrom, v.conditions !== null]);
}

/**
 * The earliest time from which two timelines judge differently (a device moved between sites in
 * the past splits a version where its site changes), or null when they are the same.
 */
export function timelineChange(before: TimelineKey, after: TimelineKey): number | null {
  for (let i = 0; i < Math.max(before.length, after.length); i++) {
    const a = before[i];
    const b = after[i];
    if (a && b && a[0] === b[0] && a[1] === b[1]) continue;
    return Math.min(a?.[0] ?? Infinity, b?.[0] ?? Infinity);
  }
  return null;
}

/** Checkpoints kept per (rule, channel). */
export const MAX_CHECKPOINTS = 16;

export interface StartPlan {
  start: State;
  /** Checkpoints still valid (before the start). */
  checkpoints: State[];
  /** Samples with `ts` after this are read. */
  readAfter: number;
}

/**
 * The checkpoints to keep: those before `before`, one per position, and at most MAX_CHECKPOINTS,
 * dropping the one closest to its predecessor each time, so that they thin out with age and still
 * reach far back.
 */
export function thin(states: readonly State[], before: number): State[] {
  const kept: State[] = [];
  for (const c of states) {
    if (positionOf(c) >= before) continue;
    if (kept.length > 0 && positionOf(kept[kept.length - 1]!) >= positionOf(c)) kept.pop();
    kept.push(c);
  }
  while (kept.length > MAX_CHECKPOINTS) {
    let drop = 1;
    for (let i = 2; i < kept.length - 1; i++) {
      const gap = positionOf(kept[i]!) - positionOf(kept[i - 1]!);
      if (gap < positionOf(kept[drop]!) - positionOf(kept[drop - 1]!)) drop = i;
    }
    kept.splice(drop, 1);
  }
  return kept;
}

/** Where to start: `markFrom` is the oldest measurement time written since the last evaluation. */
export function planStart(
  tracker: Tracker | null,
  versions: readonly Version[],
  markFrom: number | null,
): StartPlan {
  // a saved state of a version the timeline no longer has (a channel judged from a new start):
  // start over from the beginning
  const known = new Set(versions.map((v) => v.validFrom));
  if (tracker && !known.has(tracker.state.versionFrom)) tracker = null;
  // a timeline that changed since the tracker was saved: what it judged from the change on is
  // judged again, like data that arrived late from then
  const changed = tracker?.timeline ? timelineChange(tracker.timeline, timelineOf(versions)) : null;
  if (changed !== null) markFrom = markFrom === null ? changed : Math.min(markFrom, changed);
  if (tracker && (markFrom === null || markFrom > positionOf(tracker.state))) {
    return { start: tracker.state, checkpoints: tracker.checkpoints, readAfter: positionOf(tracker.state) };
  }
  const valid = (tracker?.checkpoints ?? []).filter(
    (c) => known.has(c.versionFrom) && (markFrom === null || positionOf(c) < markFrom),
  );
  const start = valid[valid.length - 1] ?? initialState(versions);
  return { start, checkpoints: valid, readAfter: positionOf(start) };
}

export interface ChannelRun {
  tracker: Tracker;
  /** The events the data supports from the start on, as of now. */
  alerts: DerivedAlert[];
  /** When the channel must be looked at again without new data (an alarm moment ahead), or null. */
  dueAt: number | null;
}

/** Folds the samples read (sorted, after `plan.readAfter`) and derives the events from the start on. */
export function runChannel(
  plan: StartPlan,
  versions: readonly Version[],
  samples: readonly Sample[],
  now: number,
): ChannelRun {
  const { state, closed } = fold(plan.start, versions, samples);
  const open = finish(state, versions, now);
  const alerts = [...closed, ...open].flatMap((x) => {
    const a = alertOf(x, versions, now);
    return a ? [a] : [];
  });
  return {
    tracker: {
      state,
      checkpoints: thin([...plan.checkpoints, plan.start], positionOf(state)),
      timeline: timelineOf(versions),
    },
    alerts,
    dueAt: dueOf(open, versions, now),
  };
}

/** Whether a stored event belongs to what a derivation from `start` decides. */
export function inScope(start: State, e: { versionFrom: number; cond: number; startedAt: number }): boolean {
  if (e.versionFrom > start.versionFrom) return true;
  if (e.versionFrom < start.versionFrom) return false;
  const run = start.runs[e.cond];
  if (run) return e.startedAt >= run.start;
  // a no_data gap starts at the start's newest sample; anything else after it
  return e.startedAt >= (start.lastTs ?? start.versionFrom);
}

/** The earliest `started_at` a stored event in scope can have (to narrow the read). */
export function scopeFrom(start: State): number {
  let from = start.lastTs ?? start.versionFrom;
  for (const r of start.runs) if (r) from = Math.min(from, r.start);
  return from;
}

export interface StoredAlert extends DerivedAlert {
  id: string;
  withdrawn: boolean;
}

export interface AlertReconciliation {
  insert: DerivedAlert[];
  update: { id: string; to: DerivedAlert; reinstate: boolean }[];
  withdraw: string[];
  unchanged: string[];
}

const keyOf = (a: { versionFrom: number; cond: number; startedAt: number }) =>
  `${a.versionFrom}:${a.cond}:${a.startedAt}`;

function same(a: DerivedAlert, b: DerivedAlert): boolean {
  return (
    a.alarmAt === b.alarmAt &&
    a.endedAt === b.endedAt &&
    a.peak === b.peak &&
    a.kind === b.kind &&
    a.severity === b.severity
  );
}

const overlaps = (a: DerivedAlert, b: DerivedAlert) =>
  a.startedAt < (b.endedAt ?? Infinity) && b.startedAt < (a.endedAt ?? Infinity);

/**
 * Makes the stored events in scope equal to the derived ones, keeping ids (and acknowledgements):
 * first by (version, condition, started_at), then an overlapping excursion of the same condition;
 * what the data no longer supports is withdrawn, never deleted.
 */
export function reconcileAlerts(
  stored: readonly StoredAlert[],
  derived: readonly DerivedAlert[],
): AlertReconciliation {
  const out: AlertReconciliation = { insert: [], update: [], withdraw: [], unchanged: [] };
  const byKey = new Map(stored.map((e) => [keyOf(e), e]));
  const taken = new Set<string>();
  const rest: DerivedAlert[] = [];
  for (const d of derived) {
    const m = byKey.get(keyOf(d));
    if (!m) {
      rest.push(d);
      continue;
    }
    taken.add(m.id);
    if (m.withdrawn) out.update.push({ id: m.id, to: d, reinstate: true });
    else if (same(m, d)) out.unchanged.push(m.id);
    else out.update.push({ id: m.id, to: d, reinstate: false });
  }
  const live = stored
    .filter((e) => !e.withdrawn && !taken.has(e.id))
    .sort((a, b) => a.startedAt - b.startedAt);
  for (const d of rest) {
    const m = live.find(
      (e) => !taken.has(e.id) && e.versionFrom === d.versionFrom && e.cond === d.cond && overlaps(e, d),
    );
    if (m) {
      taken.add(m.id);
      out.update.push({ id: m.id, to: d, reinstate: false });
    } else out.insert.push(d);
  }
  for (const e of live) if (!taken.has(e.id)) out.withdraw.push(e.id);
  return out;
}
