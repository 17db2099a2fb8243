import { newId } from '../../../shared/ids.ts';
import type { Db } from '../storage/database.ts';
import {
  covered,
  derive,
  firstUncovered,
  judge,
  nextDue,
  stateAt,
  type Derivation,
  type Interval,
  type Sample,
  type Seed,
} from './derive.ts';
import { reconcile, type Desired, type Reconciliation, type StoredEvent } from './reconcile.ts';
import type { AlarmEventRow } from '../events/events.repository.ts';
import type { ChannelRow, RulesRepository, TrackerRow } from './rules.repository.ts';
import { BEGINNING, RuleTimeline, type Rule } from './timeline.ts';

/**
 * The steps of one rule evaluation (`EVALUATION_STEPS`), all in the evaluation's transaction: plan
 * where each channel's derivation starts, read the samples and silence windows of all channels
 * together, then per channel derive, reconcile the stored events with the derived ones and decide
 * the notifications due; last, save the trackers and hand the notifications over. Each step reads
 * and fills the `Evaluation`; the database is read once per step for all channels where it can be.
 */

/** What happened to an event in one evaluation that people must hear about. */
export interface AlarmTransition {
  event: AlarmEventRow;
  opened: boolean;
  resolved: boolean;
}

/** Sends what the engine decided (mail, webhooks); called inside the evaluation's transaction. */
export interface AlarmNotifier {
  notify(db: Db, transitions: AlarmTransition[], now: number): Promise<void>;
  /** After the transaction that called `notify` committed (to start sending at once). */
  committed?(): void;
}

/**
 * What one evaluation changed that people looking at the dashboard see: sensors whose state moved,
 * and alarm events inserted, updated or withdrawn (`before` null for a new one). Told after commit.
 */
export interface EvaluationChanges {
  sensors: { accountId: string; sensorId: string }[];
  events: { before: AlarmEventRow | null; after: AlarmEventRow }[];
}

export interface EvaluationSummary {
  channels: number;
  eventsCreated: number;
  eventsUpdated: number;
  eventsWithdrawn: number;
}

/** Samples read at first, and at most at a time, when looking back for a derivation's anchor. */
const FIRST_ANCHOR_READ = 8;
const MAX_ANCHOR_READ = 512;

/** Where one channel's derivation starts and from when its samples are read (`planChannel`). */
export interface ChannelPlan {
  seed: Seed;
  /** Samples after this time (exclusive) are read; null: none. */
  readAfter: number | null;
  /** Whether the channel's stored events must be loaded even if the derivation yields none. */
  mustLoadEvents: boolean;
}

/** One channel on its way through the evaluation. */
export interface ChannelEvaluation extends ChannelPlan {
  c: ChannelRow;
  timeline: RuleTimeline;
  samples: Sample[];
}

/** One evaluation of a set of channels as it passes through the steps. */
export interface Evaluation {
  readonly seqs: readonly number[];
  /** The evaluation's time, microseconds. */
  readonly now: number;
  /** Re-derive from here even if already evaluated (recompute). */
  readonly replayFrom: number | undefined;
  /** The channels, in the order the repository lists them (`planChannels`). */
  channels: ChannelEvaluation[];
  /** Silence windows by channel seq (`readSilences`). */
  silences: Map<number, Interval[]>;
  readonly summary: EvaluationSummary;
  /** Each channel's tracker after the evaluation. */
  readonly trackerRows: TrackerRow[];
  /** Channels whose `eval_from` marker this evaluation clears (the generation it saw). */
  readonly evaluated: { seq: number; gen: number }[];
  /** Notifications due, for the notifier. */
  readonly transitions: AlarmTransition[];
  /** States and events changed, for the live updates (after commit). */
  readonly changes: EvaluationChanges;
}

export type EvaluationRepository = Pick<
  RulesRepository,
  | 'channels'
  | 'trackers'
  | 'ruleVersions'
  | 'samplesAfterMany'
  | 'samplesBefore'
  | 'silences'
  | 'ownedEvents'
  | 'heldNotices'
  | 'setState'
  | 'upsertTrackers'
  | 'clearEvaluated'
>;

/**
 * Told, inside the evaluation's transaction, the oldest measurement time not yet evaluated of each
 * channel whose marker the evaluation clears (the alert rules' engine keeps its own marker so).
 */
export interface EvaluationFollower {
  channelsEvaluated(db: Db, marks: readonly { seq: number; from: number }[]): Promise<void>;
  /** After the transaction that called `channelsEvaluated` (or `silencesChanged`) committed. */
  committed?(): void;
  /** Inside the transaction that creates or ends a silence window of the channel. */
  silencesChanged?(db: Db, seq: number, at: number): Promise<void>;
}

/** What the steps use besides the evaluation and its transaction. */
export interface EvaluationEnv {
  readonly repository: EvaluationRepository;
  readonly notifier: AlarmNotifier;
  readonly followers?: readonly EvaluationFollower[];
}

export type EvaluationStep = (ev: Evaluation, db: Db, env: EvaluationEnv) => Promise<void>;

export function newEvaluation(seqs: readonly number[], now: number, replayFrom?: number): Evaluation {
  return {
    seqs,
    now,
    replayFrom,
    channels: [],
    silences: new Map(),
    summary: { channels: 0, eventsCreated: 0, eventsUpdated: 0, eventsWithdrawn: 0 },
    trackerRows: [],
    evaluated: [],
    transitions: [],
    changes: { sensors: [], events: [] },
  };
}

/** A channel's rule as stored on its row (the rule when it has no recorded history). */
export function ruleOf(c: ChannelRow): Rule {
  return {
    okMin: c.ok_min,
    okMax: c.ok_max,
    graceMin: c.grace_min,
    enabled: c.rule_enabled === 1,
    noDataMin: c.no_data_min,
  };
}

export function storedOf(e: AlarmEventRow): StoredEvent {
  return {
    id: e.id,
    kind: e.kind,
    startedAt: e.started_at,
    alarmAt: e.alarm_at,
    endedAt: e.ended_at,
    peak: e.peak_value,
    okMin: e.ok_min,
    okMax: e.ok_max,
    silenced: e.silenced === 1,
    withdrawn: e.withdrawn_at !== null,
  };
}

/** Loads the channels, their trackers and rule histories, and plans each channel's derivation. */
export async function planChannels(
  ev: Evaluation,
  db: Db,
  { repository: repo }: EvaluationEnv,
): Promise<void> {
  const channels = await repo.channels(db, ev.seqs);
  const trackers = await repo.trackers(db, ev.seqs);
  const versions = await repo.ruleVersions(db, ev.seqs);
  for (const c of channels) {
    const timeline = new RuleTimeline(
      versions.get(c.seq) ?? [{ ...ruleOf(c), validFrom: BEGINNING }],
      c.device_deleted_at,
    );
    const plan = await planChannel(db, repo, c, trackers.get(c.seq), timeline, ev.replayFrom);
    ev.channels.push({ c, timeline, ...plan, samples: [] });
  }
}

/**
 * Where the derivation of a channel starts and from when it reads (`readAfter`, exclusive; the
 * samples of every channel are read together). Data newer than everything evaluated continues
 * from the tracker; anything else (late data, a first look, a replay) re-derives from the newest
 * in-range sample before the earliest affected time, where no excursion can be open.
 */
export async function planChannel(
  db: Db,
  repo: Pick<RulesRepository, 'samplesBefore'>,
  c: ChannelRow,
  tracker: TrackerRow | undefined,
  timeline: RuleTimeline,
  replayFrom: number | undefined,
): Promise<ChannelPlan> {
  const hadOpen = tracker?.has_open === 1;
  const evaluatedTo = tracker?.last_ts ?? null;
  const newestKnown = Math.max(evaluatedTo ?? BEGINNING, c.last_ts ?? BEGINNING);
  if (timeline.alwaysDisabled && !hadOpen) {
    // Nothing can ever alarm: move the tracker along without reading a sample.
    return {
      seed: { lastTs: newestKnown === BEGINNING ? null : newestKnown, run: null },
      readAfter: null,
      mustLoadEvents: false,
    };
  }
  const from = replayFrom === undefined ? c.eval_from : Math.min(replayFrom, c.eval_from ?? Infinity);
  if (evaluatedTo !== null && replayFrom === undefined && (from === null || from > evaluatedTo)) {
    const seed: Seed = {
      lastTs: evaluatedTo,
      run:
        tracker?.run_kind && tracker.run_start !== null && tracker.run_peak !== null
          ? { kind: tracker.run_kind, start: tracker.run_start, peak: tracker.run_peak }
          : null,
    };
    // nothing to read for a tick alone
    const unread = !(from === null && (c.last_ts ?? BEGINNING) <= evaluatedTo);
    return { seed, readAfter: unread ? evaluatedTo : null, mustLoadEvents: hadOpen };
  }
  const start = from ?? c.last_ts;
  if (start === null) return { seed: { lastTs: null, run: null }, readAfter: null, mustLoadEvents: true };
  const anchor = await anchorBefore(db, repo, c.seq, start, timeline);
  return { seed: { lastTs: anchor, run: null }, readAfter: anchor ?? BEGINNING, mustLoadEvents: true };
}

/** The newest sample before `before` that no excursion can span (in range, or under a disabled rule). */
export async function anchorBefore(
  db: Db,
  repo: Pick<RulesRepository, 'samplesBefore'>,
  seq: number,
  before: number,
  timeline: RuleTimeline,
): Promise<number | null> {
  let cursor = before;
  // Usually the newest sample qualifies: read a few first, then more at a time.
  for (let limit = FIRST_ANCHOR_READ; ; limit = Math.min(limit * 4, MAX_ANCHOR_READ)) {
    const batch = await repo.samplesBefore(db, seq, cursor, limit);
    for (const s of batch) {
      const verdict = judge(s.value, timeline.at(s.ts));
      if (verdict === 'ok' || verdict === 'off') return s.ts;
    }
    if (batch.length < limit) return null; // nothing older
    cursor = batch[batch.length - 1]!.ts;
  }
}

/**
 * The samples of all channels in a few queries, not one per channel. A pass reads up to the newest
 * the fold has seen: on PostgreSQL groups committed since are visible, and reading them now would
 * make any still-uncommitted earlier points of the same channel late data at the next pass. A
 * replay reads everything (rows may have been written around ingest).
 */
export async function readSamples(
  ev: Evaluation,
  db: Db,
  { repository: repo }: EvaluationEnv,
): Promise<void> {
  const until = (c: ChannelRow) =>
    ev.replayFrom === undefined && c.last_ts !== null ? c.last_ts : Number.MAX_SAFE_INTEGER;
  const wanted = ev.channels.flatMap((p) =>
    p.readAfter === null ? [] : [{ seq: p.c.seq, after: p.readAfter, until: until(p.c) }],
  );
  if (wanted.length === 0) return;
  const read = await repo.samplesAfterMany(db, wanted);
  for (const p of ev.channels) if (p.readAfter !== null) p.samples = read.get(p.c.seq) ?? [];
}

/** The silence windows of all channels, from the earliest time any derivation starts. */
export async function readSilences(
  ev: Evaluation,
  db: Db,
  { repository: repo }: EvaluationEnv,
): Promise<void> {
  const from = Math.min(ev.now, ...ev.channels.map((p) => p.seed.run?.start ?? p.seed.lastTs ?? BEGINNING));
  ev.silences = await repo.silences(db, ev.seqs, from);
}

/** Each channel in turn: derive, reconcile the stored events, decide notifications, move the tracker. */
export async function evaluateChannels(ev: Evaluation, db: Db, env: EvaluationEnv): Promise<void> {
  for (const p of ev.channels) await evaluateChannel(ev, db, env, p);
}

export async function evaluateChannel(
  ev: Evaluation,
  db: Db,
  { repository: repo }: EvaluationEnv,
  p: ChannelEvaluation,
): Promise<void> {
  const { c, timeline, seed } = p;
  const { now } = ev;
  const windows = ev.silences.get(c.seq) ?? [];
  const derivation = derive(seed, p.samples, timeline, now);
  const desired = desiredEvents(derivation, windows);
  const stored =
    p.mustLoadEvents || desired.length > 0 ? await repo.ownedEvents(db, c.seq, seed.lastTs, seed.run) : [];
  const plan = reconcile(stored.map(storedOf), desired);
  const final = await applyReconciliation(db, c, stored, plan, now);
  recordEventChanges(ev, stored, plan, final);
  // "Resolved" notices held by a silence window, of events older than the derivation
  const inFinal = new Set(final.map((e) => e.id));
  const held = p.mustLoadEvents ? (await repo.heldNotices(db, c.seq)).filter((e) => !inFinal.has(e.id)) : [];
  const told: AlarmEventRow[] = [];
  for (const event of [...final, ...held]) {
    const transition = await announce(db, event, windows, now);
    if (transition) ev.transitions.push(transition);
    told.push(transition?.event ?? event);
  }

  ev.summary.channels++;
  ev.summary.eventsCreated += plan.insert.length;
  ev.summary.eventsUpdated += plan.update.length;
  ev.summary.eventsWithdrawn += plan.withdraw.length;
  ev.trackerRows.push(trackerRow(c.seq, derivation, timeline, windows, told, now));
  const state = stateAt(derivation.tail, timeline, windows, now);
  if (state !== c.state) {
    await repo.setState(db, c.seq, state);
    ev.changes.sensors.push({ accountId: c.account_id, sensorId: c.id });
  }
  if (c.eval_from !== null) ev.evaluated.push({ seq: c.seq, gen: c.eval_gen });
}

/** The events a reconciliation inserted, updated or withdrew, with what they were before. */
function recordEventChanges(
  ev: Evaluation,
  stored: readonly AlarmEventRow[],
  plan: Reconciliation,
  final: readonly AlarmEventRow[],
): void {
  if (final.length === plan.unchanged.length) return;
  const unchanged = new Set(plan.unchanged);
  const before = new Map(stored.map((e) => [e.id, e]));
  for (const after of final) {
    if (!unchanged.has(after.id)) ev.changes.events.push({ before: before.get(after.id) ?? null, after });
  }
}

/** The events the data supports, each silenced when its alarm time lies in a silence window. */
export function desiredEvents(derivation: Derivation, windows: readonly Interval[]): Desired[] {
  return derivation.events.map((e) => ({ ...e, silenced: covered(e.alarmAt, windows) }));
}

/**
 * Writes a reconciliation: inserts the new events, updates the changed, withdraws those the data
 * no longer supports. Answers every event of the channel as it now stands.
 */
export async function applyReconciliation(
  db: Db,
  c: ChannelRow,
  stored: readonly AlarmEventRow[],
  plan: Reconciliation,
  now: number,
): Promise<AlarmEventRow[]> {
  const byId = new Map(stored.map((e) => [e.id, e]));
  const final: AlarmEventRow[] = [];
  for (const d of plan.insert) {
    const row: AlarmEventRow = {
      id: newId('evt'),
      account_id: c.account_id,
      site_id: c.site_id,
      device_id: c.device_id,
      sensor_id: c.id,
      channel_id: c.channel_id,
      sensor_seq: c.seq,
      kind: d.kind,
      started_at: d.startedAt,
      alarm_at: d.alarmAt,
      ended_at: d.endedAt,
      ok_min: d.okMin,
      ok_max: d.okMax,
      peak_value: d.peak,
      silenced: d.silenced ? 1 : 0,
      acknowledged_at: null,
      acknowledged_by: null,
      ack_note: null,
      withdrawn_at: null,
      notified_open_at: null,
      notified_resolved_at: null,
      created_at: now,
      updated_at: now,
    };
    await db.insertInto('alarm_events').values(row).execute();
    final.push(row);
  }
  for (const u of plan.update) {
    const fields = {
      started_at: u.to.startedAt,
      alarm_at: u.to.alarmAt,
      ended_at: u.to.endedAt,
      ok_min: u.to.okMin,
      ok_max: u.to.okMax,
      peak_value: u.to.peak,
      silenced: u.to.silenced ? 1 : 0,
      updated_at: now,
      ...(u.reinstate ? { withdrawn_at: null } : {}),
    };
    await db.updateTable('alarm_events').set(fields).where('id', '=', u.id).execute();
    final.push({ ...byId.get(u.id)!, ...fields });
  }
  for (const id of plan.withdraw) {
    await db
      .updateTable('alarm_events')
      .set({ withdrawn_at: now, updated_at: now })
      .where('id', '=', id)
      .execute();
    final.push({ ...byId.get(id)!, withdrawn_at: now, updated_at: now });
  }
  for (const id of plan.unchanged) final.push(byId.get(id)!);
  return final;
}

/** Records the notifications an event is due as sent (`notified_*_at`); answers them, or null. */
export async function announce(
  db: Db,
  event: AlarmEventRow,
  windows: readonly Interval[],
  now: number,
): Promise<AlarmTransition | null> {
  const due = dueNotifications(event, windows, now);
  if (!due) return null;
  const set = {
    ...(due.opened ? { notified_open_at: now } : {}),
    ...(due.resolved ? { notified_resolved_at: now } : {}),
  };
  await db.updateTable('alarm_events').set(set).where('id', '=', event.id).execute();
  return { ...due, event: { ...event, ...set } };
}

/** What decides an event's notifications; the alert rules' events have the same fields. */
export type NoticeFields = Pick<
  AlarmEventRow,
  'alarm_at' | 'ended_at' | 'withdrawn_at' | 'notified_open_at' | 'notified_resolved_at'
>;

/**
 * Which notifications an event is due (docs/api/rules.md: silence windows suppress notifications
 * for the window only). Opened: the alarm has begun and some moment of it lies outside every
 * silence window, up to now; an event silenced throughout is never announced. Resolved: after an
 * opened notification, once it ended or was withdrawn and some moment from then to now lies outside
 * every silence window (an end inside a window is told when the window ends).
 */
export function dueNotifications(
  e: NoticeFields,
  windows: readonly Interval[],
  now: number,
): Omit<AlarmTransition, 'event'> | null {
  let opened = false;
  if (e.notified_open_at === null && e.withdrawn_at === null && e.alarm_at <= now) {
    // The alarm's moments up to now: an alarm of no length (back in range exactly when its grace
    // ended) has the one, `alarm_at`; one recorded ahead of the server's clock, those so far.
    const until = Math.min(now, e.ended_at === null ? now : Math.max(e.ended_at - 1, e.alarm_at));
    opened = firstUncovered(e.alarm_at, until, windows) !== null;
  }
  const announced = opened || e.notified_open_at !== null;
  const closedAt = e.withdrawn_at ?? e.ended_at;
  const resolved =
    announced &&
    e.notified_resolved_at === null &&
    closedAt !== null &&
    closedAt <= now &&
    firstUncovered(closedAt, now, windows) !== null;
  return opened || resolved ? { opened, resolved } : null;
}

/**
 * Whether an event may still be due a notification without new data: open and not yet announced
 * (its alarm began inside a silence window), or announced and ended with its end not yet told.
 */
export function awaitsNotice(e: NoticeFields): boolean {
  if (e.notified_open_at === null) return e.withdrawn_at === null && e.ended_at === null;
  return e.notified_resolved_at === null && (e.ended_at !== null || e.withdrawn_at !== null);
}

/**
 * The channel's tracker after the evaluation: where the next one continues, and when it is due.
 * `has_open` also covers an event whose notice waits for a silence window to end (the next
 * evaluation loads it).
 */
export function trackerRow(
  seq: number,
  derivation: Derivation,
  timeline: RuleTimeline,
  windows: readonly Interval[],
  events: readonly AlarmEventRow[],
  now: number,
): TrackerRow {
  const tail = derivation.tail;
  // Notices whose moment lies ahead (readings stamped by a device clock that runs fast: an alarm,
  // or its end, after the server's now) are told when that moment comes: nothing else would load
  // the event again.
  const ahead = events.flatMap((e) => {
    if (e.withdrawn_at !== null || e.ended_at === null || e.notified_resolved_at !== null) return [];
    if (e.notified_open_at === null) return e.alarm_at > now && e.ended_at >= e.alarm_at ? [e.alarm_at] : [];
    return e.ended_at > now ? [e.ended_at] : [];
  });
  const open =
    ahead.length > 0 ||
    events.some((e) => (e.ended_at === null && e.withdrawn_at === null) || awaitsNotice(e));
  const due = nextDue(tail, timeline, windows, now);
  return {
    sensor_seq: seq,
    last_ts: tail.lastTs,
    run_kind: tail.run?.kind ?? null,
    run_start: tail.run?.start ?? null,
    run_peak: tail.run?.peak ?? null,
    has_open: open ? 1 : 0,
    due_at: ahead.length > 0 ? Math.min(due ?? Infinity, ...ahead) : due,
    updated_at: now,
  };
}

/** Saves the trackers and clears the markers of the channels evaluated. */
export async function saveTrackers(
  ev: Evaluation,
  db: Db,
  { repository: repo }: EvaluationEnv,
): Promise<void> {
  await repo.upsertTrackers(db, ev.trackerRows);
  await repo.clearEvaluated(db, ev.evaluated);
}

/** Hands the notifications due to the notifier, in the same transaction. */
export async function notifyTransitions(ev: Evaluation, db: Db, { notifier }: EvaluationEnv): Promise<void> {
  if (ev.transitions.length > 0) await notifier.notify(db, ev.transitions, ev.now);
}

/** Hands the followers the markers this evaluation clears, in the same transaction. */
export async function tellFollowers(ev: Evaluation, db: Db, { followers }: EvaluationEnv): Promise<void> {
  if (!followers?.length) return;
  const marks = ev.channels.flatMap((p) =>
    p.c.eval_from === null ? [] : [{ seq: p.c.seq, from: p.c.eval_from }],
  );
  if (marks.length > 0) for (const f of followers) await f.channelsEvaluated(db, marks);
}

/** The pipeline of one evaluation, as its table of contents. */
export const EVALUATION_STEPS: readonly EvaluationStep[] = [
  planChannels,
  readSamples,
  readSilences,
  evaluateChannels,
  saveTrackers,
  notifyTransitions,
  tellFollowers,
];

/** Runs the steps over one evaluation inside its transaction. */
export async function runEvaluationSteps(ev: Evaluation, db: Db, env: EvaluationEnv): Promise<void> {
  for (const step of EVALUATION_STEPS) await step(ev, db, env);
}
