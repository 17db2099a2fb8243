import { newId } from '../../../shared/ids.ts';
import type { Clock } from '../clock.ts';
import { Placement } from '../devices/moves.service.ts';
import type { Logger } from '../logger.ts';
import { covered, type Interval } from '../rules/derive.ts';
import { awaitsNotice, dueNotifications, type EvaluationFollower } from '../rules/evaluation.steps.ts';
import { lockedTransaction, type Database, type Db } from '../storage/database.ts';
import {
  planStart,
  reconcileAlerts,
  runChannel,
  inScope,
  scopeFrom,
  type StoredAlert,
  type Tracker,
} from './alert-channel.ts';
import type { Condition, DerivedAlert, Version } from './alert-evaluator.ts';
import type { Schedule } from './alert-schedule.ts';
import type {
  AlertChannel,
  AlertEventRow,
  DeviceMove,
  AlertRuleRow,
  AlertRuleVersionRow,
  AlertRulesRepository,
} from './alert-rules.repository.ts';
import type { AlertRuleListener } from './alert-rules.service.ts';
import { scopeOf } from './alert-rules.service.ts';

/** PostgreSQL advisory-lock namespace of alert evaluations (per channel). */
const ALERT_LOCK = 'alerts-channel';
const CLAIM_LIMIT = 500;
const CHUNK = 50;
const MAX_PASSES = 50;

/** Who hears about alert events: called in the evaluation's transaction. */
export interface AlertAnnouncer {
  opened(db: Db, event: AlertEventRow, now: number): Promise<void>;
  resolved(db: Db, event: AlertEventRow, now: number): Promise<void>;
  /** After commit (to start sending at once). */
  committed(): void;
  /** In the transaction that creates or ends a silence window of the channel. */
  silencesChanged(db: Db, seq: number, now: number): Promise<void>;
}

/** An alert event a pass wrote: as it was before (null when new) and as it is now. */
export interface AlertEventChange {
  before: AlertEventRow | null;
  after: AlertEventRow;
}

/**
 * The alert rules' engine (docs/design/alert-rules.md). It follows the rule engine: each rule-engine
 * evaluation records, in its own transaction, the oldest new measurement time of each channel
 * (`alert_marks`), so nothing written is missed. A pass then evaluates every (rule, channel) of the
 * marked channels and the trackers due by time (an alarm moment reached, a schedule window opening),
 * by the pure functions of `alert-channel.ts`, and writes the events the data supports.
 */
export class AlertEngine implements EvaluationFollower, AlertRuleListener {
  private timer: NodeJS.Timeout | null = null;
  private kickTimer: NodeJS.Timeout | null = null;
  private halted = false;
  private started = false;
  private chain: Promise<unknown> = Promise.resolve();
  private readonly changeListeners: ((changes: AlertEventChange[]) => void)[] = [];

  constructor(
    private readonly deps: {
      database: Database;
      clock: Clock;
      log: Logger;
      repository: AlertRulesRepository;
      announcer: AlertAnnouncer;
      tickMs?: number;
    },
  ) {}

  /** Called after each evaluation commits with the alert events it wrote (the live updates). */
  onChanges(listener: (changes: AlertEventChange[]) => void): void {
    this.changeListeners.push(listener);
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.timer = setInterval(() => this.background(true), this.deps.tickMs ?? 15_000);
    this.timer.unref();
    this.background(true);
  }

  async stop(): Promise<void> {
    this.halted = true;
    if (this.timer) clearInterval(this.timer);
    if (this.kickTimer) clearTimeout(this.kickTimer);
    this.timer = null;
    this.kickTimer = null;
    await this.chain.catch(() => undefined);
  }

  /**
   * In the rule engine's evaluation: marks the channels for the next pass. Without any live rule
   * nothing is marked; a rule created later starts each channel it covers from its own beginning.
   */
  async channelsEvaluated(db: Db, marks: readonly { seq: number; from: number }[]): Promise<void> {
    const { repository } = this.deps;
    if (await repository.anyLiveRule(db)) await repository.mark(db, marks);
  }

  committed(): void {
    this.kick();
  }

  /**
   * In the transaction of a device's move between sites (`effective_at` past or future): its
   * channels are judged again from the move on, by the rules of the site they were on at each time.
   */
  async deviceMoved(db: Db, deviceId: string, effectiveAt: number): Promise<void> {
    const { repository } = this.deps;
    if (!(await repository.anyLiveRule(db))) return;
    const seqs = await repository.deviceChannels(db, deviceId);
    await repository.mark(
      db,
      seqs.map((seq) => ({ seq, from: effectiveAt })),
    );
  }

  async ruleChanged(): Promise<void> {
    // the service has recorded the version and marked the rule's trackers due in its transaction
  }

  ruleCommitted(): void {
    this.kick();
  }

  /**
   * In the transaction that creates or ends a silence window of a channel (through the rule
   * engine): the channel's alarms are looked at again now (an opening held by the window is
   * announced when it ends early), and so is the next step of each escalation. The rule engine
   * calls `committed()` after the commit.
   */
  async silencesChanged(db: Db, seq: number, now: number): Promise<void> {
    await this.deps.repository.markChannelDue(db, seq, now);
    await this.deps.announcer.silencesChanged(db, seq, now);
  }

  kick(): void {
    if (!this.started || this.halted || this.kickTimer) return;
    this.kickTimer = setTimeout(() => {
      this.kickTimer = null;
      this.background();
    }, 200);
    this.kickTimer.unref();
  }

  private background(orphans = false): void {
    if (this.halted) return;
    this.drain(orphans).catch((err: unknown) => this.deps.log.error({ err }, 'alert evaluation failed'));
  }

  /**
   * Evaluates until nothing is marked or due (tests call it after ingest and after moving the
   * clock). The tick (and a drain) also ends the alarms of channels whose device was deleted.
   */
  drain(orphans = true): Promise<void> {
    const work = async () => {
      for (let i = 0; i < MAX_PASSES && !this.halted; i++)
        if ((await this.pass(orphans && i === 0)) === 0) return;
    };
    const next = this.chain.then(work, work);
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async pass(orphans: boolean): Promise<number> {
    const { repository, database, clock } = this.deps;
    const db = database.db;
    const now = clock.nowMicros();
    const marks = await repository.marks(db, CLAIM_LIMIT);
    await this.trackNewChannels(
      db,
      marks.map((m) => m.sensor_seq),
      now,
    );
    const seqs = [
      ...new Set([
        ...marks.map((m) => m.sensor_seq),
        ...(await repository.dueChannels(db, now, CLAIM_LIMIT)),
        ...(orphans ? await repository.orphanedChannels(db, CLAIM_LIMIT) : []),
      ]),
    ];
    for (let i = 0; i < seqs.length; i += CHUNK) await this.evaluate(seqs.slice(i, i + CHUNK), now);
    return seqs.length;
  }

  /** Channels that appeared under a rule's site and kind since it was written get their tracker. */
  private async trackNewChannels(db: Db, seqs: number[], now: number): Promise<void> {
    const { repository } = this.deps;
    const channels = await repository.channels(db, seqs);
    const rules = await repository.liveRules(db, [
      ...new Set([...channels.values()].map((c) => c.account_id)),
    ]);
    const moves = await repository.deviceMoves(
      db,
      [...channels.values()].map((c) => c.device_id),
    );
    const pairs: { ruleId: string; seq: number }[] = [];
    for (const c of channels.values())
      for (const r of rules)
        if (r.account_id === c.account_id && coversEver(r, c, moves.get(c.device_id) ?? []))
          pairs.push({ ruleId: r.id, seq: c.seq });
    await repository.ensureTrackers(db, pairs, now);
  }

  /** One transaction over a chunk of channels, locked per channel across replicas. */
  async evaluate(seqs: number[], now: number): Promise<void> {
    const { database, repository, announcer } = this.deps;
    let announced = false;
    const changes: AlertEventChange[] = [];
    await lockedTransaction(database, { namespace: ALERT_LOCK, keys: seqs }, async (db) => {
      changes.length = 0; // a retried transaction tells only what its last run wrote
      // The time is read again under the channels' locks: a pass's later chunks would otherwise
      // judge at the pass's start, before an evaluation (a read's settle) that committed since,
      // and withdraw the alarm it had just opened.
      now = Math.max(now, this.deps.clock.nowMicros());
      const marks = await repository.marksOf(db, seqs);
      const trackers = await repository.trackersOf(db, seqs);
      const channels = await repository.channels(db, seqs);
      const ruleIds = [...new Set(trackers.map((t) => t.rule_id))];
      const rules = await repository.rulesById(db, ruleIds);
      const versions = await repository.versions(db, ruleIds);
      const silences = await repository.silences(db, seqs);
      const moves = await repository.deviceMoves(
        db,
        [...channels.values()].map((c) => c.device_id),
      );
      for (const t of trackers) {
        const rule = rules.get(t.rule_id);
        const channel = channels.get(t.sensor_seq);
        const rows = versions.get(t.rule_id) ?? [];
        if (!rule || !channel || rows.length === 0) {
          await repository.deleteTracker(db, t.rule_id, t.sensor_seq);
          continue;
        }
        const placement = moves.get(channel.device_id) ?? [];
        const timeline = versionsFor(rows, channel, placement);
        const gone = channel.device_deleted_at !== null;
        const markFrom = marks.get(t.sensor_seq)?.from_ts ?? null;
        const saved = t.state === null ? null : (JSON.parse(t.state) as Tracker);
        const plan = planStart(saved, timeline, markFrom);
        const samples = await repository.samples(db, channel.seq, plan.readAfter, now);
        const run = runChannel(plan, timeline, samples, now);
        const stored = (await repository.events(db, rule.id, channel.seq, scopeFrom(plan.start))).filter(
          (e) => inScope(plan.start, { versionFrom: e.version_from, cond: e.cond, startedAt: e.started_at }),
        );
        const windows = silences.get(channel.seq) ?? [];
        const applied = await this.apply(
          db,
          rule,
          channel,
          timeline,
          siteAt(channel, placement),
          stored,
          run.alerts,
          windows,
          now,
          changes,
        );
        // events whose notice a silence window held, older than what this run derived
        const inRun = new Set(applied.map((e) => e.id));
        const held = saved?.notices
          ? (await repository.eventsAwaitingNotice(db, rule.id, channel.seq)).filter((e) => !inRun.has(e.id))
          : [];
        const final: AlertEventRow[] = [];
        for (const e of [...applied, ...held]) {
          const told = await this.announce(db, e, windows, now);
          announced = told.told || announced;
          final.push(told.event);
        }
        const notices = final.some(awaitsNotice);
        let due = run.dueAt;
        if (markFrom !== null) {
          const ahead = await repository.nextSampleTs(db, channel.seq, now);
          if (ahead !== null) due = due === null ? ahead : Math.min(due, ahead);
        }
        // a notice held by a silence window is looked at again when the window ends
        if (notices) for (const w of windows) if (w.to > now && (due === null || w.to < due)) due = w.to;
        if (
          (rule.deleted_at !== null || gone) &&
          !final.some((e) => (e.ended_at === null && e.withdrawn_at === null) || awaitsNotice(e))
        )
          await repository.deleteTracker(db, t.rule_id, t.sensor_seq);
        else
          await repository.saveTracker(db, {
            rule_id: t.rule_id,
            sensor_seq: t.sensor_seq,
            state: JSON.stringify({ ...run.tracker, ...(notices ? { notices } : {}) }),
            due_at: due,
            updated_at: now,
          });
      }
      await repository.clearMarks(db, [...marks.values()]);
    });
    if (announced) announcer.committed();
    if (changes.length > 0) this.tellChanges(changes);
  }

  private tellChanges(changes: AlertEventChange[]): void {
    for (const listener of this.changeListeners) {
      try {
        listener(changes);
      } catch (err) {
        this.deps.log.error({ err }, 'alert change listener failed');
      }
    }
  }

  /** Writes the reconciliation; answers the events of the scope as they now stand. */
  private async apply(
    db: Db,
    rule: AlertRuleRow,
    c: AlertChannel,
    timeline: readonly Version[],
    site: (ts: number) => string,
    stored: AlertEventRow[],
    alerts: DerivedAlert[],
    windows: readonly Interval[],
    now: number,
    changes: AlertEventChange[],
  ): Promise<AlertEventRow[]> {
    const asStored: StoredAlert[] = stored.map((e) => ({
      id: e.id,
      withdrawn: e.withdrawn_at !== null,
      versionFrom: e.version_from,
      cond: e.cond,
      kind: e.kind,
      severity: e.severity,
      startedAt: e.started_at,
      alarmAt: e.alarm_at,
      endedAt: e.ended_at,
      peak: e.peak_value,
    }));
    const plan = reconcileAlerts(asStored, alerts);
    const byId = new Map(stored.map((e) => [e.id, e]));
    const silenced = (t: number) => (covered(t, windows) ? 1 : 0);
    const fields = (d: DerivedAlert) => ({
      kind: d.kind,
      severity: d.severity,
      started_at: d.startedAt,
      alarm_at: d.alarmAt,
      ended_at: d.endedAt,
      peak_value: d.peak,
      silenced: silenced(d.alarmAt),
    });
    const out: AlertEventRow[] = [];
    for (const d of plan.insert) {
      const condition = timeline.find((v) => v.validFrom === d.versionFrom)!.conditions![d.cond]!;
      const row: AlertEventRow = {
        id: newId('evt'),
        account_id: rule.account_id,
        rule_id: rule.id,
        version_from: d.versionFrom,
        cond: d.cond,
        condition: JSON.stringify(condition),
        site_id: site(d.startedAt),
        device_id: c.device_id,
        sensor_id: c.sensor_id,
        channel_id: c.channel_id,
        sensor_seq: c.seq,
        ...fields(d),
        acknowledged_at: null,
        acknowledged_by: null,
        ack_note: null,
        withdrawn_at: null,
        notified_open_at: null,
        notified_resolved_at: null,
        notify_n: 0,
        created_at: now,
        updated_at: now,
      };
      await db.insertInto('alert_events').values(row).execute();
      out.push(row);
      changes.push({ before: null, after: row });
    }
    for (const u of plan.update) {
      const set = { ...fields(u.to), updated_at: now, ...(u.reinstate ? { withdrawn_at: null } : {}) };
      await db.updateTable('alert_events').set(set).where('id', '=', u.id).execute();
      const after = { ...byId.get(u.id)!, ...set };
      out.push(after);
      changes.push({ before: byId.get(u.id)!, after });
    }
    for (const id of plan.withdraw) {
      await db
        .updateTable('alert_events')
        .set({ withdrawn_at: now, updated_at: now })
        .where('id', '=', id)
        .execute();
      const after = { ...byId.get(id)!, withdrawn_at: now, updated_at: now };
      out.push(after);
      changes.push({ before: byId.get(id)!, after });
    }
    for (const id of plan.unchanged) out.push(byId.get(id)!);
    return out;
  }

  /**
   * The simple rule's decision (`dueNotifications`): opened once some moment of the alarm lies
   * outside every silence window (an alarm that began inside one is announced when it ends, if still
   * open), and the escalation chain starts; resolved once, after an opening, when it ended or was
   * withdrawn and some moment since lies outside every window. Answers the event as it now stands.
   */
  private async announce(
    db: Db,
    e: AlertEventRow,
    windows: readonly Interval[],
    now: number,
  ): Promise<{ told: boolean; event: AlertEventRow }> {
    const { announcer } = this.deps;
    const due = dueNotifications(e, windows, now);
    if (!due) return { told: false, event: e };
    let event = e;
    if (due.opened) {
      await db.updateTable('alert_events').set({ notified_open_at: now }).where('id', '=', e.id).execute();
      event = { ...event, notified_open_at: now };
      await announcer.opened(db, event, now);
    }
    if (due.resolved) {
      await db
        .updateTable('alert_events')
        .set({ notified_resolved_at: now })
        .where('id', '=', e.id)
        .execute();
      event = { ...event, notified_resolved_at: now };
      await announcer.resolved(db, event, now);
    }
    return { told: true, event };
  }
}

/** Whether a rule (as its row or a version) covers a channel, with the channel's device on `siteId`. */
export function covers(
  r: { channel_ids: string | null; site_id: string | null; kind: string | null },
  c: AlertChannel,
  siteId = c.site_id,
): boolean {
  const scope = scopeOf(r);
  return scope.channel_ids
    ? scope.channel_ids.includes(c.channel_id)
    : scope.site_id === siteId && scope.kind === c.kind;
}

/**
 * The site of a channel's device at each time, from its moves (oldest first; a pending move
 * included): a measurement with `ts < effective_at` belongs to the old site.
 */
export function siteAt(c: AlertChannel, moves: readonly DeviceMove[]): (ts: number) => string {
  const placement = new Placement(moves[0]?.from_site_id ?? c.site_id, moves);
  return (ts) => placement.siteAt(ts);
}

/** Whether a rule covers a channel at any time of its device's placement history. */
export function coversEver(
  r: { channel_ids: string | null; site_id: string | null; kind: string | null },
  c: AlertChannel,
  moves: readonly DeviceMove[],
): boolean {
  const sites = new Set([c.site_id, ...moves.flatMap((m) => [m.from_site_id, m.to_site_id])]);
  return [...sites].some((site) => covers(r, c, site));
}

/**
 * The rule's versions as they apply to one channel: not covering it or disabled is "not in force".
 * A rule on a site's channels of a kind applies while the device is on that site: a move within a
 * version begins a new one where the rule starts or stops applying.
 */
export function versionsFor(
  rows: readonly AlertRuleVersionRow[],
  c: AlertChannel,
  moves: readonly DeviceMove[] = [],
): Version[] {
  const site = siteAt(c, moves);
  const versions: Version[] = [];
  rows.forEach((v, i) => {
    const end = rows[i + 1]?.valid_from ?? Infinity;
    const conditions = JSON.parse(v.conditions) as Condition[];
    const schedule = v.schedule === null ? null : (JSON.parse(v.schedule) as Schedule);
    const applies = (ts: number) => v.enabled === 1 && covers(v, c, site(ts));
    let on = applies(v.valid_from);
    versions.push({ validFrom: v.valid_from, conditions: on ? conditions : null, schedule });
    for (const m of moves) {
      if (m.effective_at <= v.valid_from || m.effective_at >= end || applies(m.effective_at) === on) continue;
      on = !on;
      versions.push({ validFrom: m.effective_at, conditions: on ? conditions : null, schedule });
    }
  });
  // a channel that appeared after the rule began is judged from its appearance (no no_data
  // alarm for the time before it existed)
  const since = c.sensor_created_at;
  let first = 0;
  while (first + 1 < versions.length && versions[first + 1]!.validFrom <= since) first++;
  if (versions[first] && versions[first]!.validFrom < since)
    versions.splice(0, first + 1, { ...versions[first]!, validFrom: since });
  const deleted = c.device_deleted_at;
  if (deleted === null) return versions;
  // the device's deletion ends the rule for its channels, like a version that covers nothing
  const before = versions.filter((v) => v.validFrom < deleted);
  if (before.length === 0) return versions.slice(0, 1).map((v) => ({ ...v, conditions: null }));
  return [...before, { validFrom: deleted, conditions: null, schedule: null }];
}
