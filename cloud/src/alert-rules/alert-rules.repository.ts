import { sql } from 'kysely';
import type { Db } from '../storage/database.ts';
import { keysetPage, type PageRequest } from '../storage/keyset.ts';
import { measurementGroup } from '../storage/layout.ts';
import type { Tables } from '../storage/schema.ts';
import type { Sample } from './alert-evaluator.ts';

export type AlertRuleRow = Tables['alert_rules'];
export type AlertRuleVersionRow = Tables['alert_rule_versions'];
export type AlertTrackerRow = Tables['alert_trackers'];
export type AlertEventRow = Tables['alert_events'];

/** A channel as the alert engine needs it: what it is and where, to match rules and label events. */
export interface AlertChannel {
  seq: number;
  sensor_id: string;
  channel_id: string;
  account_id: string;
  device_id: string;
  site_id: string;
  kind: string;
  /** The device's deletion: the rule stops applying then. */
  device_deleted_at: number | null;
  /** When the channel appeared: a rule older than the channel applies to it from then. */
  sensor_created_at: number;
}

/** A move of a device between sites (`device_moves`), as the alert engine places measurements. */
export interface DeviceMove {
  effective_at: number;
  from_site_id: string;
  to_site_id: string;
}

/** The SQL of alert rules (migration 0013): rules, versions, marks, trackers and their events. */
export class AlertRulesRepository {
  /** The moves of these devices between sites, oldest first per device (pending ones included). */
  async deviceMoves(db: Db, deviceIds: readonly string[]): Promise<Map<string, DeviceMove[]>> {
    const out = new Map<string, DeviceMove[]>();
    if (deviceIds.length === 0) return out;
    const rows = await db
      .selectFrom('device_moves')
      .select(['device_id', 'effective_at', 'from_site_id', 'to_site_id'])
      .where('device_id', 'in', [...new Set(deviceIds)])
      .orderBy('device_id')
      .orderBy('effective_at')
      .execute();
    for (const { device_id, ...m } of rows)
      out.set(device_id, [...(out.get(device_id) ?? []), { ...m, effective_at: Number(m.effective_at) }]);
    return out;
  }

  /** The channels of a device. */
  async deviceChannels(db: Db, deviceId: string): Promise<number[]> {
    const rows = await db.selectFrom('sensors').select('seq').where('device_id', '=', deviceId).execute();
    return rows.map((r) => Number(r.seq));
  }

  async insert(db: Db, row: AlertRuleRow): Promise<void> {
    await db.insertInto('alert_rules').values(row).execute();
  }

  async find(db: Db, accountId: string, id: string): Promise<AlertRuleRow | undefined> {
    return db
      .selectFrom('alert_rules')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
  }

  async list(db: Db, accountId: string, page: PageRequest): Promise<AlertRuleRow[]> {
    const q = db
      .selectFrom('alert_rules')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('deleted_at', 'is', null);
    return keysetPage(q, 'created_at', 'id', 'asc', page).execute();
  }

  async update(db: Db, id: string, fields: Partial<AlertRuleRow>): Promise<void> {
    await db.updateTable('alert_rules').set(fields).where('id', '=', id).execute();
  }

  /** Records the version in force from `at` (a second change in the same microsecond replaces it). */
  async recordVersion(db: Db, row: AlertRuleVersionRow): Promise<void> {
    const { rule_id: _r, valid_from: _v, ...rest } = row;
    await db
      .insertInto('alert_rule_versions')
      .values(row)
      .onConflict((oc) => oc.columns(['rule_id', 'valid_from']).doUpdateSet(rest))
      .execute();
  }

  async rulesById(db: Db, ids: readonly string[]): Promise<Map<string, AlertRuleRow>> {
    if (ids.length === 0) return new Map();
    const rows = await db
      .selectFrom('alert_rules')
      .selectAll()
      .where('id', 'in', [...ids])
      .execute();
    return new Map(rows.map((r) => [r.id, r]));
  }

  async versions(db: Db, ruleIds: readonly string[]): Promise<Map<string, AlertRuleVersionRow[]>> {
    const out = new Map<string, AlertRuleVersionRow[]>();
    if (ruleIds.length === 0) return out;
    const rows = await db
      .selectFrom('alert_rule_versions')
      .selectAll()
      .where('rule_id', 'in', [...ruleIds])
      .orderBy('valid_from')
      .execute();
    for (const r of rows) out.set(r.rule_id, [...(out.get(r.rule_id) ?? []), r]);
    return out;
  }

  /** The live rules of the accounts (to find those a channel falls under). */
  async liveRules(db: Db, accountIds: readonly string[]): Promise<AlertRuleRow[]> {
    if (accountIds.length === 0) return [];
    return db
      .selectFrom('alert_rules')
      .selectAll()
      .where('account_id', 'in', [...accountIds])
      .where('deleted_at', 'is', null)
      .execute();
  }

  private channelQuery(db: Db) {
    return db
      .selectFrom('sensors as s')
      .innerJoin('devices as d', 'd.id', 's.device_id')
      .select([
        's.seq',
        's.id as sensor_id',
        's.channel_id',
        's.account_id',
        's.device_id',
        'd.site_id',
        's.kind',
        'd.deleted_at as device_deleted_at',
        's.created_at as sensor_created_at',
      ]);
  }

  /** Channels of deleted devices that still have a tracker (their open alarms end at the deletion). */
  async orphanedChannels(db: Db, limit: number): Promise<number[]> {
    const rows = await db
      .selectFrom('alert_trackers as t')
      .innerJoin('sensors as s', 's.seq', 't.sensor_seq')
      .innerJoin('devices as d', 'd.id', 's.device_id')
      .select('t.sensor_seq')
      .where('d.deleted_at', 'is not', null)
      .limit(limit)
      .execute();
    return [...new Set(rows.map((r) => r.sensor_seq))];
  }

  async channels(db: Db, seqs: readonly number[]): Promise<Map<number, AlertChannel>> {
    if (seqs.length === 0) return new Map();
    const rows = await this.channelQuery(db)
      .where('s.seq', 'in', [...seqs])
      .execute();
    return new Map(rows.map((r) => [r.seq, r]));
  }

  /** The account's channels a rule's scope names now: listed ones, or every one of a kind on a site. */
  async channelsInScope(
    db: Db,
    accountId: string,
    scope: { channel_ids: string[] | null; site_id: string | null; kind: string | null },
  ): Promise<AlertChannel[]> {
    let q = this.channelQuery(db).where('s.account_id', '=', accountId).where('d.deleted_at', 'is', null);
    if (scope.channel_ids) q = q.where('s.channel_id', 'in', scope.channel_ids);
    else q = q.where('d.site_id', '=', scope.site_id!).where('s.kind', '=', scope.kind!);
    return q.execute();
  }

  /** Adds the trackers missing for these (rule, channel) pairs, due at once. */
  async ensureTrackers(
    db: Db,
    pairs: readonly { ruleId: string; seq: number }[],
    now: number,
  ): Promise<void> {
    if (pairs.length === 0) return;
    await db
      .insertInto('alert_trackers')
      .values(
        pairs.map((p) => ({
          rule_id: p.ruleId,
          sensor_seq: p.seq,
          state: null,
          due_at: now,
          updated_at: now,
        })),
      )
      .onConflict((oc) => oc.columns(['rule_id', 'sensor_seq']).doNothing())
      .execute();
  }

  async markRuleDue(db: Db, ruleId: string, now: number): Promise<void> {
    await db.updateTable('alert_trackers').set({ due_at: now }).where('rule_id', '=', ruleId).execute();
  }

  /**
   * Moves each channel's mark back to the oldest time given (the rule engine's transaction), in one
   * statement, rows in ascending seq like every other writer of several marks.
   */
  async mark(db: Db, marks: readonly { seq: number; from: number }[]): Promise<void> {
    if (marks.length === 0) return;
    const rows = [...marks]
      .sort((a, b) => a.seq - b.seq)
      .map((m) => ({ sensor_seq: m.seq, from_ts: m.from, gen: 0 }));
    await db
      .insertInto('alert_marks')
      .values(rows)
      .onConflict((oc) =>
        oc.column('sensor_seq').doUpdateSet({
          from_ts: sql`CASE WHEN excluded.from_ts < alert_marks.from_ts THEN excluded.from_ts ELSE alert_marks.from_ts END`,
          gen: sql`alert_marks.gen + 1`,
        }),
      )
      .execute();
  }

  /** Whether any alert rule is live (no rule: ingest need not mark channels for the alert engine). */
  async anyLiveRule(db: Db): Promise<boolean> {
    const row = await db
      .selectFrom('alert_rules')
      .select('id')
      .where('deleted_at', 'is', null)
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  }

  async marks(db: Db, limit: number): Promise<Tables['alert_marks'][]> {
    return db.selectFrom('alert_marks').selectAll().orderBy('from_ts').limit(limit).execute();
  }

  async marksOf(db: Db, seqs: readonly number[]): Promise<Map<number, Tables['alert_marks']>> {
    if (seqs.length === 0) return new Map();
    const rows = await db
      .selectFrom('alert_marks')
      .selectAll()
      .where('sensor_seq', 'in', [...seqs])
      .execute();
    return new Map(rows.map((r) => [r.sensor_seq, r]));
  }

  /** Clears the marks an evaluation saw, unless moved since (a newer generation). */
  async clearMarks(db: Db, seen: readonly Tables['alert_marks'][]): Promise<void> {
    for (const m of [...seen].sort((a, b) => a.sensor_seq - b.sensor_seq))
      await db
        .deleteFrom('alert_marks')
        .where('sensor_seq', '=', m.sensor_seq)
        .where('gen', '=', m.gen)
        .execute();
  }

  async dueChannels(db: Db, now: number, limit: number): Promise<number[]> {
    const rows = await db
      .selectFrom('alert_trackers')
      .select('sensor_seq')
      .where('due_at', '<=', now)
      .orderBy('due_at')
      .limit(limit)
      .execute();
    return [...new Set(rows.map((r) => r.sensor_seq))];
  }

  async trackersOf(db: Db, seqs: readonly number[]): Promise<AlertTrackerRow[]> {
    if (seqs.length === 0) return [];
    return db
      .selectFrom('alert_trackers')
      .selectAll()
      .where('sensor_seq', 'in', [...seqs])
      .orderBy('sensor_seq')
      .orderBy('rule_id')
      .execute();
  }

  async saveTracker(db: Db, row: AlertTrackerRow): Promise<void> {
    await db
      .updateTable('alert_trackers')
      .set({ state: row.state, due_at: row.due_at, updated_at: row.updated_at })
      .where('rule_id', '=', row.rule_id)
      .where('sensor_seq', '=', row.sensor_seq)
      .execute();
  }

  async deleteTracker(db: Db, ruleId: string, seq: number): Promise<void> {
    await db
      .deleteFrom('alert_trackers')
      .where('rule_id', '=', ruleId)
      .where('sensor_seq', '=', seq)
      .execute();
  }

  /** Samples of a channel after `after` up to `until`, oldest first. */
  async samples(db: Db, seq: number, after: number, until: number): Promise<Sample[]> {
    return db
      .selectFrom('measurements')
      .select(['ts', 'value'])
      .where('grp', '=', measurementGroup(seq))
      .where('sensor_seq', '=', seq)
      .where('ts', '>', after)
      .where('ts', '<=', until)
      .orderBy('ts')
      .execute();
  }

  /** The first measurement after `after`, if any (data stamped ahead of the clock). */
  async nextSampleTs(db: Db, seq: number, after: number): Promise<number | null> {
    const row = await db
      .selectFrom('measurements')
      .select('ts')
      .where('grp', '=', measurementGroup(seq))
      .where('sensor_seq', '=', seq)
      .where('ts', '>', after)
      .orderBy('ts')
      .limit(1)
      .executeTakeFirst();
    return row?.ts ?? null;
  }

  async events(db: Db, ruleId: string, seq: number, from: number): Promise<AlertEventRow[]> {
    return db
      .selectFrom('alert_events')
      .selectAll()
      .where('rule_id', '=', ruleId)
      .where('sensor_seq', '=', seq)
      .where('started_at', '>=', from)
      .execute();
  }

  /** Silence windows of the channels, each [from, to). */
  async silences(db: Db, seqs: readonly number[]): Promise<Map<number, { from: number; to: number }[]>> {
    const out = new Map<number, { from: number; to: number }[]>();
    if (seqs.length === 0) return out;
    const rows = await db
      .selectFrom('silences')
      .select(['sensor_seq', 'from_ts', 'to_ts', 'ended_at'])
      .where('sensor_seq', 'in', [...seqs])
      .execute();
    for (const r of rows) {
      const end = r.ended_at === null ? r.to_ts : Math.min(r.to_ts, r.ended_at);
      out.set(r.sensor_seq, [...(out.get(r.sensor_seq) ?? []), { from: r.from_ts, to: end }]);
    }
    return out;
  }

  async findEvent(db: Db, id: string): Promise<AlertEventRow | undefined> {
    return db.selectFrom('alert_events').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /**
   * Events of a (rule, channel) that may still be due a notification without new data (open and
   * not announced, or ended and the end not told): their notices wait for a silence window to end.
   */
  async eventsAwaitingNotice(db: Db, ruleId: string, seq: number): Promise<AlertEventRow[]> {
    return db
      .selectFrom('alert_events')
      .selectAll()
      .where('rule_id', '=', ruleId)
      .where('sensor_seq', '=', seq)
      .where('notified_resolved_at', 'is', null)
      .where((eb) =>
        eb.or([
          eb.and([
            eb('notified_open_at', 'is', null),
            eb('ended_at', 'is', null),
            eb('withdrawn_at', 'is', null),
          ]),
          eb.and([
            eb('notified_open_at', 'is not', null),
            eb.or([eb('ended_at', 'is not', null), eb('withdrawn_at', 'is not', null)]),
          ]),
        ]),
      )
      .execute();
  }

  /**
   * Announced events of a channel with a notification still to send: the first (always sent), or a
   * later one while the alarm is open, not acknowledged and not withdrawn.
   */
  async escalating(db: Db, seq: number): Promise<AlertEventRow[]> {
    return db
      .selectFrom('alert_events')
      .selectAll()
      .where('sensor_seq', '=', seq)
      .where('notified_open_at', 'is not', null)
      .where('withdrawn_at', 'is', null)
      .where((eb) =>
        eb.or([
          eb('notify_n', '=', 0),
          eb.and([eb('ended_at', 'is', null), eb('acknowledged_at', 'is', null)]),
        ]),
      )
      .execute();
  }

  /** Makes every tracker of a channel due at `now` (a silence window changed). */
  async markChannelDue(db: Db, seq: number, now: number): Promise<void> {
    await db
      .updateTable('alert_trackers')
      .set({ due_at: now })
      .where('sensor_seq', '=', seq)
      .where((eb) => eb.or([eb('due_at', 'is', null), eb('due_at', '>', now)]))
      .execute();
  }

  /**
   * Advances an event's notification count from `n` to `next` (reminders missed in a silence
   * window are skipped); false when another run already did.
   */
  async claimNotification(db: Db, id: string, n: number, next = n + 1): Promise<boolean> {
    const r = await db
      .updateTable('alert_events')
      .set({ notify_n: next })
      .where('id', '=', id)
      .where('notify_n', '=', n)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) === 1;
  }

  async usersByIds(
    db: Db,
    accountId: string,
    ids: readonly string[],
  ): Promise<{ id: string; email: string }[]> {
    if (ids.length === 0) return [];
    return db
      .selectFrom('users')
      .select(['id', 'email'])
      .where('account_id', '=', accountId)
      .where('id', 'in', [...ids])
      .execute();
  }

  async webhookIds(db: Db, accountId: string, ids: readonly string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await db
      .selectFrom('webhooks')
      .select('id')
      .where('account_id', '=', accountId)
      .where('deleted_at', 'is', null)
      .where('id', 'in', [...ids])
      .execute();
    return rows.map((r) => r.id);
  }
}
