import type { AlarmEventRow } from '../events/events.repository.ts';
import type { Db } from '../storage/database.ts';
import { measurementGroup } from '../storage/layout.ts';
import type { Tables } from '../storage/schema.ts';
import type { Sample } from './derive.ts';
import { BEGINNING, type RuleVersion } from './timeline.ts';

export type TrackerRow = Tables['channel_trackers'];

/** The channel facts one evaluation needs: its rule, ids, site, and the ingest marker. */
export interface ChannelRow {
  seq: number;
  id: string;
  channel_id: string;
  account_id: string;
  device_id: string;
  kind: string;
  unit: string;
  ok_min: number;
  ok_max: number;
  grace_min: number;
  rule_enabled: number;
  no_data_min: number;
  state: Tables['sensors']['state'];
  last_ts: number | null;
  eval_from: number | null;
  eval_gen: number;
  site_id: string;
  device_deleted_at: number | null;
}

const BATCH_READ = 512;
/** Ranges per query of `samplesAfterMany` (a range: channels of one group, up to 64). */
const RANGES_PER_READ = 8;
/** How far apart the `after` of two channels of a group may lie for them to share a range read. */
const RANGE_SLACK_MICROS = 5 * 60 * 1_000_000;

/** The SQL of the rule engine: trackers, rule history, dirty channels and a channel's samples. */
export class RulesRepository {
  /** Channels with data not yet evaluated (ingest set `eval_from`), oldest first. */
  async dirtyChannels(db: Db, limit: number): Promise<number[]> {
    const rows = await db
      .selectFrom('sensors')
      .select('seq')
      .where('eval_from', 'is not', null)
      .orderBy('eval_from')
      .limit(limit)
      .execute();
    return rows.map((r) => r.seq);
  }

  /** Channels whose state can change by the passing of time by `now` (grace ends, data stops...). */
  async dueChannels(db: Db, now: number, limit: number): Promise<number[]> {
    const rows = await db
      .selectFrom('channel_trackers')
      .select('sensor_seq')
      .where('due_at', '<=', now)
      .orderBy('due_at')
      .limit(limit)
      .execute();
    return rows.map((r) => r.sensor_seq);
  }

  /**
   * Those of `seqs` whose stored state may be out of date by `now`: data not yet evaluated, or a
   * due time reached (grace ends, data stops, a silence window or a rule change).
   */
  async staleChannels(db: Db, seqs: readonly number[], now: number): Promise<number[]> {
    if (seqs.length === 0) return [];
    const rows = await db
      .selectFrom('sensors as s')
      .leftJoin('channel_trackers as t', 't.sensor_seq', 's.seq')
      .select('s.seq')
      .where('s.seq', 'in', [...seqs])
      .where((eb) => eb.or([eb('s.eval_from', 'is not', null), eb('t.due_at', '<=', now)]))
      .execute();
    return rows.map((r) => r.seq);
  }

  /** Channels of deleted devices that still have open events (they are closed at the deletion). */
  async orphanedOpenChannels(db: Db, limit: number): Promise<number[]> {
    const rows = await db
      .selectFrom('alarm_events as e')
      .innerJoin('devices as d', 'd.id', 'e.device_id')
      .select('e.sensor_seq')
      .distinct()
      .where('e.ended_at', 'is', null)
      .where('e.withdrawn_at', 'is', null)
      .where('d.deleted_at', 'is not', null)
      .limit(limit)
      .execute();
    return rows.map((r) => r.sensor_seq);
  }

  async channels(db: Db, seqs: readonly number[]): Promise<ChannelRow[]> {
    if (seqs.length === 0) return [];
    const rows = await db
      .selectFrom('sensors as s')
      .innerJoin('devices as d', 'd.id', 's.device_id')
      .select([
        's.seq',
        's.id',
        's.channel_id',
        's.account_id',
        's.device_id',
        's.kind',
        's.unit',
        's.ok_min',
        's.ok_max',
        's.grace_min',
        's.rule_enabled',
        's.no_data_min',
        's.state',
        's.last_ts',
        's.eval_from',
        's.eval_gen',
        'd.site_id',
        'd.deleted_at as device_deleted_at',
      ])
      .where('s.seq', 'in', [...seqs])
      .execute();
    return rows.map((r) => ({ ...r, eval_from: r.eval_from ?? null, eval_gen: Number(r.eval_gen ?? 0) }));
  }

  async trackers(db: Db, seqs: readonly number[]): Promise<Map<number, TrackerRow>> {
    if (seqs.length === 0) return new Map();
    const rows = await db
      .selectFrom('channel_trackers')
      .selectAll()
      .where('sensor_seq', 'in', [...seqs])
      .execute();
    return new Map(rows.map((r) => [r.sensor_seq, r]));
  }

  async ruleVersions(db: Db, seqs: readonly number[]): Promise<Map<number, RuleVersion[]>> {
    const out = new Map<number, RuleVersion[]>();
    if (seqs.length === 0) return out;
    const rows = await db
      .selectFrom('rule_versions')
      .selectAll()
      .where('sensor_seq', 'in', [...seqs])
      .orderBy('sensor_seq')
      .orderBy('valid_from')
      .execute();
    for (const r of rows) {
      const list = out.get(r.sensor_seq) ?? [];
      list.push({
        validFrom: r.valid_from,
        okMin: r.ok_min,
        okMax: r.ok_max,
        graceMin: r.grace_min,
        enabled: r.rule_enabled === 1,
        noDataMin: r.no_data_min,
      });
      out.set(r.sensor_seq, list);
    }
    return out;
  }

  /**
   * Records a rule change at `at`: the first change also records the rule the sensor had until then,
   * from the beginning of time. Two changes in the same microsecond keep the later one.
   */
  async recordRuleChange(
    db: Db,
    seq: number,
    before: Omit<RuleVersion, 'validFrom'>,
    after: Omit<RuleVersion, 'validFrom'>,
    at: number,
  ): Promise<void> {
    const existing = await db
      .selectFrom('rule_versions')
      .select('valid_from')
      .where('sensor_seq', '=', seq)
      .limit(1)
      .executeTakeFirst();
    const row = (validFrom: number, r: Omit<RuleVersion, 'validFrom'>) => ({
      sensor_seq: seq,
      valid_from: validFrom,
      ok_min: r.okMin,
      ok_max: r.okMax,
      grace_min: r.graceMin,
      rule_enabled: r.enabled ? 1 : 0,
      no_data_min: r.noDataMin,
    });
    const rows = existing ? [row(at, after)] : [row(BEGINNING, before), row(at, after)];
    await db
      .insertInto('rule_versions')
      .values(rows)
      .onConflict((oc) =>
        oc.columns(['sensor_seq', 'valid_from']).doUpdateSet((eb) => ({
          ok_min: eb.ref('excluded.ok_min'),
          ok_max: eb.ref('excluded.ok_max'),
          grace_min: eb.ref('excluded.grace_min'),
          rule_enabled: eb.ref('excluded.rule_enabled'),
          no_data_min: eb.ref('excluded.no_data_min'),
        })),
      )
      .execute();
  }

  /** Asks the engine to look at the channel at its next pass (rule change, new silence window). */
  async markDue(db: Db, seq: number, at: number): Promise<void> {
    await db
      .insertInto('channel_trackers')
      .values({
        sensor_seq: seq,
        last_ts: null,
        run_kind: null,
        run_start: null,
        run_peak: null,
        has_open: 0,
        due_at: at,
        updated_at: at,
      })
      .onConflict((oc) => oc.column('sensor_seq').doUpdateSet({ due_at: at }))
      .execute();
  }

  /**
   * Samples with `after < ts <= until` of many channels, oldest first per channel (the hot path:
   * every channel an ingest group wrote). Rows are keyed (grp, ts, sensor_seq), so any range read of
   * one channel walks its whole group's rows in that range: channels of a group whose `after` lie
   * close together are read in one range, and each keeps its own rows. A channel far behind the
   * others (a first look, a replay) gets a range of its own, so the others' older rows are not read.
   */
  async samplesAfterMany(
    db: Db,
    wanted: readonly { seq: number; after: number; until: number }[],
  ): Promise<Map<number, Sample[]>> {
    const out = new Map<number, Sample[]>(wanted.map((w) => [w.seq, []]));
    const span = new Map(wanted.map((w) => [w.seq, w]));
    const ranges: { grp: number; from: number; to: number; seqs: number[] }[] = [];
    const sorted = [...wanted].sort(
      (a, b) => measurementGroup(a.seq) - measurementGroup(b.seq) || a.after - b.after,
    );
    for (const w of sorted) {
      const grp = measurementGroup(w.seq);
      const last = ranges[ranges.length - 1];
      if (last && last.grp === grp && w.after - last.from <= RANGE_SLACK_MICROS) {
        last.to = Math.max(last.to, w.until);
        last.seqs.push(w.seq);
      } else ranges.push({ grp, from: w.after, to: w.until, seqs: [w.seq] });
    }
    for (let i = 0; i < ranges.length; i += RANGES_PER_READ) {
      const rows = await db
        .selectFrom('measurements')
        .select(['sensor_seq', 'ts', 'value'])
        .where((eb) =>
          eb.or(
            ranges
              .slice(i, i + RANGES_PER_READ)
              .map((r) =>
                eb.and([
                  eb('grp', '=', r.grp),
                  eb('ts', '>', r.from),
                  eb('ts', '<=', r.to),
                  eb('sensor_seq', 'in', r.seqs),
                ]),
              ),
          ),
        )
        .orderBy('sensor_seq')
        .orderBy('ts')
        .execute();
      for (const r of rows) {
        const w = span.get(r.sensor_seq)!;
        if (r.ts > w.after && r.ts <= w.until) out.get(r.sensor_seq)!.push({ ts: r.ts, value: r.value });
      }
    }
    return out;
  }

  /** The channel's samples with `ts < before`, newest first, `limit` at a time. */
  async samplesBefore(db: Db, seq: number, before: number, limit = BATCH_READ): Promise<Sample[]> {
    return db
      .selectFrom('measurements')
      .select(['ts', 'value'])
      .where('grp', '=', measurementGroup(seq))
      .where('sensor_seq', '=', seq)
      .where('ts', '<', before)
      .orderBy('ts', 'desc')
      .limit(limit)
      .execute();
  }

  async countSamples(db: Db, seq: number, from: number, to: number): Promise<number> {
    const row = await db
      .selectFrom('measurements')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('grp', '=', measurementGroup(seq))
      .where('sensor_seq', '=', seq)
      .where('ts', '>=', from)
      .where('ts', '<=', to)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /**
   * The stored events a derivation seeded after `lastTs` speaks about: those that started after it,
   * the seeded excursion's own, and any still open; withdrawn ones too (a key may come back).
   */
  async ownedEvents(
    db: Db,
    seq: number,
    lastTs: number | null,
    run: { kind: string; start: number } | null,
  ): Promise<AlarmEventRow[]> {
    let q = db.selectFrom('alarm_events').selectAll().where('sensor_seq', '=', seq);
    if (lastTs !== null) {
      q = q.where((eb) =>
        eb.or([
          eb('started_at', '>', lastTs),
          eb.and([eb('ended_at', 'is', null), eb('withdrawn_at', 'is', null)]),
          ...(run
            ? [eb.and([eb('kind', '=', run.kind as AlarmEventRow['kind']), eb('started_at', '=', run.start)])]
            : []),
        ]),
      );
    }
    return q.orderBy('started_at').execute();
  }

  /**
   * Events of a channel whose notice waits without new data: announced, ended or withdrawn, the end
   * not yet told (a silence window holds it); or ended before their alarm's moment came, recorded
   * ahead of it (stamped by a device clock that runs fast), not yet announced.
   */
  async heldNotices(db: Db, seq: number): Promise<AlarmEventRow[]> {
    return db
      .selectFrom('alarm_events')
      .selectAll()
      .where('sensor_seq', '=', seq)
      .where((eb) =>
        eb.or([
          eb.and([
            eb('notified_open_at', 'is not', null),
            eb('notified_resolved_at', 'is', null),
            eb.or([eb('ended_at', 'is not', null), eb('withdrawn_at', 'is not', null)]),
          ]),
          eb.and([
            eb('notified_open_at', 'is', null),
            eb('withdrawn_at', 'is', null),
            eb('ended_at', 'is not', null),
            eb('alarm_at', '>', eb.ref('created_at')),
          ]),
        ]),
      )
      .execute();
  }

  async upsertTrackers(db: Db, rows: TrackerRow[]): Promise<void> {
    if (rows.length === 0) return;
    await db
      .insertInto('channel_trackers')
      .values(rows)
      .onConflict((oc) =>
        oc.column('sensor_seq').doUpdateSet((eb) => ({
          last_ts: eb.ref('excluded.last_ts'),
          run_kind: eb.ref('excluded.run_kind'),
          run_start: eb.ref('excluded.run_start'),
          run_peak: eb.ref('excluded.run_peak'),
          has_open: eb.ref('excluded.has_open'),
          due_at: eb.ref('excluded.due_at'),
          updated_at: eb.ref('excluded.updated_at'),
        })),
      )
      .execute();
  }

  /**
   * Clears the ingest marker of channels whose `eval_gen` is still what the evaluation read: a
   * channel that received data meanwhile stays marked and is evaluated again.
   */
  async clearEvaluated(db: Db, done: readonly { seq: number; gen: number }[]): Promise<void> {
    for (let i = 0; i < done.length; i += 200) {
      const chunk = done.slice(i, i + 200);
      await db
        .updateTable('sensors')
        .set({ eval_from: null })
        .where((eb) => eb.or(chunk.map((c) => eb.and([eb('seq', '=', c.seq), eb('eval_gen', '=', c.gen)]))))
        .execute();
    }
  }

  async setState(db: Db, seq: number, state: Tables['sensors']['state']): Promise<void> {
    await db.updateTable('sensors').set({ state }).where('seq', '=', seq).execute();
  }

  /** Silence windows of the channels that end after `after`. */
  async silences(
    db: Db,
    seqs: readonly number[],
    after: number,
  ): Promise<Map<number, { from: number; to: number }[]>> {
    const out = new Map<number, { from: number; to: number }[]>();
    if (seqs.length === 0) return out;
    const rows = await db
      .selectFrom('silences')
      .select(['sensor_seq', 'from_ts', 'to_ts'])
      .where('sensor_seq', 'in', [...seqs])
      .where('to_ts', '>', after)
      .where((eb) => eb('to_ts', '>', eb.ref('from_ts')))
      .execute();
    for (const r of rows) {
      const list = out.get(r.sensor_seq) ?? [];
      list.push({ from: r.from_ts, to: r.to_ts });
      out.set(r.sensor_seq, list);
    }
    return out;
  }
}
