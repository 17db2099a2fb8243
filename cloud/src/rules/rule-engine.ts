import { MICROS_PER_HOUR } from '../../../shared/time.ts';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import type { RuleChangeListener, RuleFields } from '../sensors/sensors.service.ts';
import { lockedTransaction, type Database, type Db } from '../storage/database.ts';
import { Throttle } from '../throttle.ts';
import {
  newEvaluation,
  runEvaluationSteps,
  type AlarmNotifier,
  type EvaluationChanges,
  type EvaluationEnv,
  type EvaluationFollower,
  type EvaluationSummary,
} from './evaluation.steps.ts';
import type { RulesRepository } from './rules.repository.ts';
import type { Rule } from './timeline.ts';

export type {
  AlarmNotifier,
  AlarmTransition,
  EvaluationChanges,
  EvaluationSummary,
} from './evaluation.steps.ts';

/** PostgreSQL advisory-lock namespace of channel evaluations (see `lockedTransaction`). */
const CHANNEL_LOCK = 'rules-channel';
const CHUNK = 100;
const CLAIM_LIMIT = 500;
const MAX_PASSES_PER_DRAIN = 50;
export const RECOMPUTE_WINDOW_MICROS = 24 * MICROS_PER_HOUR;

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
  /** Since start, after commit: channel evaluations and alarm events opened (read by `GET /metrics`). */
  readonly counts = { channelsEvaluated: 0, alarmsOpened: 0 };
  /** New data was committed: a pass at once after a quiet spell, otherwise `kickDelayMs` after the last. */
  private readonly kicks: Throttle;
  private halted = false;
  private started = false;
  private chain: Promise<unknown> = Promise.resolve();
  private queuedDrain: { untilIdle: boolean; promise: Promise<void> } | null = null;
  private readonly env: EvaluationEnv;
  private readonly changeListeners: ((changes: EvaluationChanges) => void)[] = [];
  private readonly followers: EvaluationFollower[] = [];
  /** A silence window changed: the followers hear of it with the kick that follows its commit. */
  private silencesToTell = false;

  constructor(
    private readonly deps: {
      database: Database;
      clock: Clock;
      log: Logger;
      repository: RulesRepository;
      notifier: AlarmNotifier;
      /** How often the tick runs (default 15 s). */
      tickMs?: number;
      /**
       * The least time between passes that kicks start (default 1 s), so that under steady ingest the
       * points of several groups are evaluated together.
       */
      kickDelayMs?: number;
      /** Brings ingest's derived state (the `eval_from` marker, last values) up to date (ingest.fold.ts). */
      catchUp?: () => Promise<void>;
    },
  ) {
    this.env = { repository: deps.repository, notifier: deps.notifier, followers: this.followers };
    this.kicks = new Throttle(deps.kickDelayMs ?? 1000, () => this.runInBackground());
  }

  /** Adds a follower told of the channels each evaluation clears (the alert rules' engine). */
  follow(follower: EvaluationFollower): void {
    this.followers.push(follower);
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.tickTimer = setInterval(() => this.runInBackground(), this.deps.tickMs ?? 15_000);
    this.tickTimer.unref();
    this.runInBackground(); // catches up on whatever a previous process left marked
  }

  /** Called after each evaluation commits with the states and events it changed (the live updates). */
  onChanges(listener: (changes: EvaluationChanges) => void): void {
    this.changeListeners.push(listener);
  }

  /** Stops the timers and waits for the evaluation in flight. Safe to call twice. */
  async stop(): Promise<void> {
    this.halted = true;
    if (this.tickTimer) clearInterval(this.tickTimer);
    this.kicks.cancel();
    this.tickTimer = null;
    await this.chain.catch(() => undefined);
  }

  /**
   * New data was committed: evaluate at once after a quiet spell, otherwise `kickDelayMs` after the
   * last pass started (the kicks meanwhile share one pass).
   */
  kick(): void {
    if (this.silencesToTell) {
      this.silencesToTell = false;
      for (const f of this.followers) f.committed?.();
    }
    if (this.started && !this.halted) this.kicks.request();
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
   * back to back, as fast as the database answers (measured on PostgreSQL at 3,000 requests/s:
   * 18 passes a second, a third of the server's CPU per request and half of PostgreSQL's, where one
   * a second does the same work). A backlog (a pass that claimed its limit) is still worked off at
   * once.
   */
  private queueDrain(untilIdle: boolean): Promise<void> {
    if (this.queuedDrain) {
      this.queuedDrain.untilIdle ||= untilIdle;
      return this.queuedDrain.promise;
    }
    // The drain's first pass finds whatever is committed before it starts: a kick from now on waits
    // for the next turn.
    this.kicks.started();
    const entry = { untilIdle, promise: Promise.resolve() };
    entry.promise = this.serialize(async () => {
      this.queuedDrain = null;
      for (let i = 0; i < MAX_PASSES_PER_DRAIN && !this.halted; i++) {
        const background = !entry.untilIdle;
        const { claimed, held } = await this.pass(background);
        if (claimed === 0) return;
        // Nothing held: another replica is evaluating every one of them.
        if (background && (held === 0 || (claimed < CLAIM_LIMIT && this.kicks.pending))) return;
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

  /**
   * Evaluates what is due, in chunks; answers how many channels it found and how many of them it
   * evaluated. In the background, channels another replica is evaluating are left to it
   * (`skipLocked`): every replica's engine is kicked by its own ingest, and they found the same
   * channels, so waiting for each other's locks made them evaluate each channel one after the
   * other (docs/benchmarks/replicas.md). A drain (`untilIdle`) waits for them instead.
   */
  private async pass(background = false): Promise<{ claimed: number; held: number }> {
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
    let held = 0;
    for (let i = 0; i < seqs.length; i += CHUNK) {
      held += (await this.evaluateLocked(seqs.slice(i, i + CHUNK), now, { skipLocked: background })).held;
    }
    return { claimed: seqs.length, held };
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

  /**
   * Inside a silence window's transaction: the state and pending notifications may change, the
   * followers' too (the silences service kicks the engine after commit).
   */
  async silencesChanged(db: Db, seq: number): Promise<void> {
    const now = this.deps.clock.nowMicros();
    await this.deps.repository.markDue(db, seq, now);
    for (const f of this.followers) {
      if (!f.silencesChanged) continue;
      await f.silencesChanged(db, seq, now);
      this.silencesToTell = true;
    }
  }

  /**
   * Evaluates `seqs` in one transaction, by the steps of `evaluation.steps.ts`. `replayFrom`:
   * re-derive from there even if already evaluated.
   */
  async evaluate(
    seqs: number[],
    now: number,
    replayFrom?: number,
    inTransaction?: (db: Db, summary: EvaluationSummary) => Promise<void>,
  ): Promise<EvaluationSummary> {
    return (await this.evaluateLocked(seqs, now, { replayFrom, inTransaction })).summary;
  }

  /** `evaluate`; with `skipLocked`, only those of `seqs` no other transaction holds (`held` of them). */
  private async evaluateLocked(
    seqs: number[],
    now: number,
    options: {
      replayFrom?: number;
      inTransaction?: (db: Db, summary: EvaluationSummary) => Promise<void>;
      skipLocked?: boolean;
    },
  ): Promise<{ summary: EvaluationSummary; held: number }> {
    // The channels' sensor rows are locked first, in seq order, as the ingest fold locks them: an
    // evaluation writes them (state, the marker) and the trackers in an order of its own.
    const lock = {
      namespace: CHANNEL_LOCK,
      keys: seqs,
      rows: { table: 'sensors', key: 'seq' },
      skipLocked: options.skipLocked ?? false,
    } as const;
    let held = 0;
    const summary = await lockedTransaction(this.deps.database, lock, async (db, keys) => {
      held = keys.length;
      // The time is read again under the channels' locks: a pass's later chunks would otherwise
      // judge at the pass's start, before an evaluation (a read's settle) that committed since,
      // and withdraw the alarm it had just opened.
      const evaluation = newEvaluation(keys, Math.max(now, this.deps.clock.nowMicros()), options.replayFrom);
      if (keys.length > 0 || seqs.length === 0) await runEvaluationSteps(evaluation, db, this.env);
      await options.inTransaction?.(db, evaluation.summary);
      return evaluation;
    }).then(({ summary, transitions, changes, evaluated }) => {
      this.counts.channelsEvaluated += summary.channels;
      this.counts.alarmsOpened += summary.eventsCreated;
      if (transitions.length > 0) this.deps.notifier.committed?.();
      if (changes.sensors.length > 0 || changes.events.length > 0) this.tellChanges(changes);
      if (evaluated.length > 0) for (const f of this.followers) f.committed?.();
      return summary;
    });
    return { summary, held };
  }

  private tellChanges(changes: EvaluationChanges): void {
    for (const listener of this.changeListeners) {
      try {
        listener(changes);
      } catch (err) {
        this.deps.log.error({ err }, 'rule change listener failed');
      }
    }
  }
}
