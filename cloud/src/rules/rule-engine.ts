import { newId } from '../../../shared/ids.ts';
import { MICROS_PER_HOUR } from '../../../shared/time.ts';
import type { Clock } from '../clock.ts';
import type { AlarmEventRow } from '../events/events.repository.ts';
import type { Logger } from '../logger.ts';
import type { RuleChangeListener, RuleFields } from '../sensors/sensors.service.ts';
import { lockedTransaction, type Database, type Db } from '../storage/database.ts';
import {
  covered,
  derive,
  firstUncovered,
  judge,
  nextDue,
  stateAt,
  type Interval,
  type Sample,
  type Seed,
} from './derive.ts';
import { reconcile, type Desired, type StoredEvent } from './reconcile.ts';
import type { ChannelRow, RulesRepository, TrackerRow } from './rules.repository.ts';
import { BEGINNING, RuleTimeline, type Rule } from './timeline.ts';

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

export interface EvaluationSummary {
  channels: number;
  eventsCreated: number;
  eventsUpdated: number;
  eventsWithdrawn: number;
}

/** PostgreSQL advisory-lock namespace of channel evaluations (see `lockedTransaction`). */
const CHANNEL_LOCK = 7335002;
const CHUNK = 100;
const CLAIM_LIMIT = 500;
const MAX_PASSES_PER_DRAIN = 50;
/** Samples read at first, and at most at a time, when looking back for a derivation's anchor. */
const FIRST_ANCHOR_READ = 8;
const MAX_ANCHOR_READ = 512;
export const RECOMPUTE_WINDOW_MICROS = 24 * MICROS_PER_HOUR;

function ruleOf(c: ChannelRow): Rule {
  return {
    okMin: c.ok_min,
    okMax: c.ok_max,
    graceMin: c.grace_min,
    enabled: c.rule_enabled === 1,
    noDataMin: c.no_data_min,
  };
}

function storedOf(e: AlarmEventRow): StoredEvent {
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

/**
 * The rule engine: keeps sensor states and alarm events equal to `derive()` of the stored data.
 *
 * Work arrives three ways, all ending in `evaluate()`: the channels ingest wrote are marked
 * (`sensors.eval_from`) by the fold of ingest's durable journal, which each pass catches up first
 * (`catchUp`), and ingest kicks the engine after commit; a periodic tick
 * picks up channels whose state changes with time alone (`channel_trackers.due_at`: grace ends,
 * data stops, a silence window begins or ends); and recompute replays 24 hours on request.
 * Evaluations run one at a time per process and hold a per-channel lock across replicas.
 */
export class RuleEngine implements RuleChangeListener {
  private tickTimer: NodeJS.Timeout | null = null;
  private kickTimer: NodeJS.Timeout | null = null;
  private halted = false;
  private started = false;
  private chain: Promise<unknown> = Promise.resolve();
  private queuedDrain: { untilIdle: boolean; promise: Promise<void> } | null = null;

  constructor(
    private readonly deps: {
      database: Database;
      clock: Clock;
      log: Logger;
      repository: RulesRepository;
      notifier: AlarmNotifier;
      /** How often the tick runs (default 15 s). */
      tickMs?: number;
      /** How long a kick waits so that the points of several ingest groups are evaluated together. */
      kickDelayMs?: number;
      /** Brings ingest's derived state (the `eval_from` marker, last values) up to date (ingest.fold.ts). */
      catchUp?: () => Promise<void>;
    },
  ) {}

  start(): void {
    if (this.started) return;
    this.started = true;
    this.tickTimer = setInterval(() => this.runInBackground(), this.deps.tickMs ?? 15_000);
    this.tickTimer.unref();
    this.runInBackground(); // catches up on whatever a previous process left marked
  }

  /** Stops the timers and waits for the evaluation in flight. Safe to call twice. */
  async stop(): Promise<void> {
    this.halted = true;
    if (this.tickTimer) clearInterval(this.tickTimer);
    if (this.kickTimer) clearTimeout(this.kickTimer);
    this.tickTimer = null;
    this.kickTimer = null;
    await this.chain.catch(() => undefined);
  }

  /** New data was committed: evaluate soon (several kicks in a short while share one pass). */
  kick(): void {
    if (!this.started || this.halted || this.kickTimer) return;
    this.kickTimer = setTimeout(() => {
      this.kickTimer = null;
      this.runInBackground();
    }, this.deps.kickDelayMs ?? 1000);
    this.kickTimer.unref();
  }

  private runInBackground(): void {
    if (this.halted) return;
    this.queueDrain(false).catch((err: unknown) => this.deps.log.error({ err }, 'rule evaluation failed'));
  }

  /**
   * Evaluates every channel with unevaluated data or a due time at or before now, until none is
   * left (tests call it after ingest, and after moving the clock, instead of waiting).
   */
  drain(): Promise<void> {
    return this.queueDrain(true);
  }

  /**
   * A drain in the background (a kick, the tick) stops early under a steady stream of data: then
   * every pass finds the channels written during the one before, a few new points each, and a kick
   * is pending that brings the next pass within `kickDelayMs` anyway. Looping on would evaluate
   * back to back, as fast as the database answers, where one pass a second does the same work
   * (docs/design/rules.md, "Alternatives rejected"). A backlog (a pass that claimed its limit) is
   * still worked off at once.
   */
  private queueDrain(untilIdle: boolean): Promise<void> {
    if (this.queuedDrain) {
      this.queuedDrain.untilIdle ||= untilIdle;
      return this.queuedDrain.promise;
    }
    const entry = { untilIdle, promise: Promise.resolve() };
    entry.promise = this.serialize(async () => {
      this.queuedDrain = null;
      for (let i = 0; i < MAX_PASSES_PER_DRAIN && !this.halted; i++) {
        const claimed = await this.pass();
        if (claimed === 0) return;
        if (!entry.untilIdle && claimed < CLAIM_LIMIT && this.kickTimer) return;
      }
    });
    this.queuedDrain = entry;
    return entry.promise;
  }

  /** The periodic tick: the same as a drain (named for what the tests mean by it). */
  tick(): Promise<void> {
    return this.drain();
  }

  private serialize<T>(work: () => Promise<T>): Promise<T> {
    const next = this.chain.then(work, work);
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async pass(): Promise<number> {
    const { repository, database, clock } = this.deps;
    await this.deps.catchUp?.();
    const now = clock.nowMicros();
    const db = database.db;
    const seqs = [
      ...new Set([
        ...(await repository.dirtyChannels(db, CLAIM_LIMIT)),
        ...(await repository.dueChannels(db, now, CLAIM_LIMIT)),
        ...(await repository.orphanedOpenChannels(db, CLAIM_LIMIT)),
      ]),
    ];
    for (let i = 0; i < seqs.length; i += CHUNK) await this.evaluate(seqs.slice(i, i + CHUNK), now);
    return seqs.length;
  }

  /**
   * Replays the rule engine over the channel's last 24 hours (and anything newer): missed events are
   * created, events the data no longer supports are withdrawn; a second call changes nothing.
   */
  recompute(
    seq: number,
    record?: (db: Db, result: EvaluationSummary & { replayed: number }) => Promise<void>,
  ): Promise<EvaluationSummary & { replayed: number }> {
    return this.serialize(async () => {
      await this.deps.catchUp?.();
      const now = this.deps.clock.nowMicros();
      const from = now - RECOMPUTE_WINDOW_MICROS;
      let result: (EvaluationSummary & { replayed: number }) | null = null;
      await this.evaluate([seq], now, from, async (db, summary) => {
        result = { ...summary, replayed: await this.deps.repository.countSamples(db, seq, from, now) };
        await record?.(db, result);
      });
      return result!;
    });
  }

  /**
   * Brings the stored state of `seqs` up to date before a read (reads reflect writes): folds what
   * ingest committed, then evaluates, now rather than at the next pass, those of them with data not
   * yet evaluated or a due time reached. Alarm events and notifications decided here are the same
   * as a pass would decide; channels already up to date cost one query.
   */
  async settle(seqs: readonly number[]): Promise<void> {
    await this.deps.catchUp?.();
    if (seqs.length === 0) return;
    const now = this.deps.clock.nowMicros();
    const stale = await this.deps.repository.staleChannels(this.deps.database.db, seqs, now);
    if (stale.length > 0) await this.evaluate(stale, now);
  }

  /** Inside a rule change's transaction (PATCH /v1/sensors): keeps the history, re-evaluates soon. */
  async ruleChanged(
    db: Db,
    sensor: { seq: number },
    before: RuleFields,
    after: RuleFields,
    at: number,
  ): Promise<void> {
    const rule = (r: RuleFields): Rule => ({
      okMin: r.ok_min,
      okMax: r.ok_max,
      graceMin: r.grace_min,
      enabled: r.rule_enabled === 1,
      noDataMin: r.no_data_min,
    });
    await this.deps.repository.recordRuleChange(db, sensor.seq, rule(before), rule(after), at);
    await this.deps.repository.markDue(db, sensor.seq, at);
  }

  ruleCommitted(): void {
    this.kick();
  }

  /** Inside a silence window's transaction: the state and pending notifications may change. */
  async silencesChanged(db: Db, seq: number): Promise<void> {
    await this.deps.repository.markDue(db, seq, this.deps.clock.nowMicros());
  }

  /** Evaluates `seqs` in one transaction. `replayFrom`: re-derive from there even if already evaluated. */
  async evaluate(
    seqs: number[],
    now: number,
    replayFrom?: number,
    inTransaction?: (db: Db, summary: EvaluationSummary) => Promise<void>,
  ): Promise<EvaluationSummary> {
    const { repository: repo, database } = this.deps;
    // The channels' sensor rows are locked first, in seq order, as the ingest fold locks them: an
    // evaluation writes them (state, the marker) and the trackers in an order of its own.
    const lock = { namespace: CHANNEL_LOCK, keys: seqs, rows: { table: 'sensors', key: 'seq' } } as const;
    return lockedTransaction(database, lock, async (db) => {
      const summary: EvaluationSummary = {
        channels: 0,
        eventsCreated: 0,
        eventsUpdated: 0,
        eventsWithdrawn: 0,
      };
      const channels = await repo.channels(db, seqs);
      const trackers = await repo.trackers(db, seqs);
      const versions = await repo.ruleVersions(db, seqs);
      const trackerRows: TrackerRow[] = [];
      const evaluated: { seq: number; gen: number }[] = [];
      const transitions: AlarmTransition[] = [];

      const plans = [];
      for (const c of channels) {
        const timeline = new RuleTimeline(
          versions.get(c.seq) ?? [{ ...ruleOf(c), validFrom: BEGINNING }],
          c.device_deleted_at,
        );
        const plan = await this.plan(db, c, trackers.get(c.seq), timeline, replayFrom);
        plans.push({ c, timeline, ...plan, samples: [] as Sample[] });
      }
      // The samples of all channels are read in a few queries, not one per channel; a pass reads up
      // to the newest the fold has seen: on PostgreSQL groups committed since are visible, and
      // reading them now would make any still-uncommitted earlier points of the same channel late
      // data at the next pass. A replay reads everything (rows may have been written around ingest).
      const until = (c: ChannelRow) =>
        replayFrom === undefined && c.last_ts !== null ? c.last_ts : Number.MAX_SAFE_INTEGER;
      const wanted = plans.flatMap((p) =>
        p.readAfter === null ? [] : [{ seq: p.c.seq, after: p.readAfter, until: until(p.c) }],
      );
      if (wanted.length > 0) {
        const read = await repo.samplesAfterMany(db, wanted);
        for (const p of plans) if (p.readAfter !== null) p.samples = read.get(p.c.seq) ?? [];
      }
      const windowStart = Math.min(now, ...plans.map((p) => p.seed.run?.start ?? p.seed.lastTs ?? BEGINNING));
      const silences = await repo.silences(db, seqs, windowStart);

      for (const p of plans) {
        const { c, timeline, seed } = p;
        const windows = silences.get(c.seq) ?? [];
        const derivation = derive(seed, p.samples, timeline, now);
        const desired: Desired[] = derivation.events.map((e) => ({
          ...e,
          silenced: covered(e.alarmAt, windows),
        }));
        const stored =
          p.mustLoadEvents || desired.length > 0
            ? await repo.ownedEvents(db, c.seq, seed.lastTs, seed.run)
            : [];
        const plan = reconcile(stored.map(storedOf), desired);
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

        for (const event of final) {
          const t = this.transition(event, windows, now);
          if (!t) continue;
          const set = {
            ...(t.opened ? { notified_open_at: now } : {}),
            ...(t.resolved ? { notified_resolved_at: now } : {}),
          };
          await db.updateTable('alarm_events').set(set).where('id', '=', event.id).execute();
          transitions.push({ ...t, event: { ...event, ...set } });
        }

        summary.channels++;
        summary.eventsCreated += plan.insert.length;
        summary.eventsUpdated += plan.update.length;
        summary.eventsWithdrawn += plan.withdraw.length;
        const open = final.some((e) => e.ended_at === null && e.withdrawn_at === null);
        const tail = derivation.tail;
        trackerRows.push({
          sensor_seq: c.seq,
          last_ts: tail.lastTs,
          run_kind: tail.run?.kind ?? null,
          run_start: tail.run?.start ?? null,
          run_peak: tail.run?.peak ?? null,
          has_open: open ? 1 : 0,
          due_at: nextDue(tail, timeline, windows, now),
          updated_at: now,
        });
        const state = stateAt(tail, timeline, windows, now);
        if (state !== c.state) await repo.setState(db, c.seq, state);
        if (c.eval_from !== null) evaluated.push({ seq: c.seq, gen: c.eval_gen });
      }
      await repo.upsertTrackers(db, trackerRows);
      await repo.clearEvaluated(db, evaluated);
      if (transitions.length > 0) await this.deps.notifier.notify(db, transitions, now);
      await inTransaction?.(db, summary);
      return { summary, notified: transitions.length > 0 };
    }).then(({ summary, notified }) => {
      if (notified) this.deps.notifier.committed?.();
      return summary;
    });
  }

  /**
   * Where the derivation of a channel starts and from when it reads (`readAfter`, exclusive; the
   * caller reads every channel's samples together). Data newer than everything evaluated continues
   * from the tracker; anything else (late data, a first look, a replay) re-derives from the newest
   * in-range sample before the earliest affected time, where no excursion can be open.
   */
  private async plan(
    db: Db,
    c: ChannelRow,
    tracker: TrackerRow | undefined,
    timeline: RuleTimeline,
    replayFrom: number | undefined,
  ): Promise<{ seed: Seed; readAfter: number | null; mustLoadEvents: boolean }> {
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
      // read later, with the other channels' (samplesAfterMany); nothing to read for a tick alone
      const unread = !(from === null && (c.last_ts ?? BEGINNING) <= evaluatedTo);
      return { seed, readAfter: unread ? evaluatedTo : null, mustLoadEvents: hadOpen };
    }
    const start = from ?? c.last_ts;
    if (start === null) return { seed: { lastTs: null, run: null }, readAfter: null, mustLoadEvents: true };
    // From there on, everything is read with the other channels' samples (samplesAfterMany).
    const anchor = await this.anchorBefore(db, c.seq, start, timeline);
    return { seed: { lastTs: anchor, run: null }, readAfter: anchor ?? BEGINNING, mustLoadEvents: true };
  }

  /** The newest sample before `before` that no excursion can span (in range, or under a disabled rule). */
  private async anchorBefore(
    db: Db,
    seq: number,
    before: number,
    timeline: RuleTimeline,
  ): Promise<number | null> {
    let cursor = before;
    // Usually the newest sample qualifies: read a few first, then more at a time.
    for (let limit = FIRST_ANCHOR_READ; ; limit = Math.min(limit * 4, MAX_ANCHOR_READ)) {
      const batch = await this.deps.repository.samplesBefore(db, seq, cursor, limit);
      for (const s of batch) {
        const verdict = judge(s.value, timeline.at(s.ts));
        if (verdict === 'ok' || verdict === 'off') return s.ts;
      }
      if (batch.length < limit) return null; // nothing older
      cursor = batch[batch.length - 1]!.ts;
    }
  }

  /**
   * Which notifications an event is due (docs/api.md: silence windows suppress notifications for the
   * window only). Opened: the alarm has begun and some moment of it lies outside every silence
   * window, up to now; an event silenced throughout is never announced. Resolved: after an opened
   * notification, once it ended or was withdrawn.
   */
  private transition(
    e: AlarmEventRow,
    windows: Interval[],
    now: number,
  ): Omit<AlarmTransition, 'event'> | null {
    let opened = false;
    if (e.notified_open_at === null && e.withdrawn_at === null && e.alarm_at <= now) {
      const until = e.ended_at === null ? now : e.ended_at - 1;
      opened = until >= e.alarm_at && firstUncovered(e.alarm_at, until, windows) !== null;
    }
    const announced = opened || e.notified_open_at !== null;
    const resolved =
      announced && e.notified_resolved_at === null && (e.ended_at !== null || e.withdrawn_at !== null);
    return opened || resolved ? { opened, resolved } : null;
  }
}
