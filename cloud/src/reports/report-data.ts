import type { Placement } from '../devices/moves.service.ts';
import type { Db } from '../storage/database.ts';
import type { GroupScan } from '../storage/group-scan.ts';
import { measurementGroup, rollupGroup } from '../storage/layout.ts';
import type { Tables } from '../storage/schema.ts';
import type {
  ReportAlarm,
  ReportChannel,
  ReportInput,
  ReportMove,
  ReportRecompute,
  ReportSeries,
  ReportSilence,
  ReportThresholdChange,
  RuleSegment,
  RuleSnapshot,
} from './report-input.ts';
import { reportedChannels } from './report-input.ts';
import type { ReportRow } from './reports.repository.ts';

type AlertAlarmRow = Tables['alert_events'] & { rule_name: string };

/** The shortest time span read per query (a channel denser than this still gets whole minutes). */
const MIN_SCAN_WINDOW = 60 * 1_000_000;

/**
 * The readings a report's series may hold at once (16 bytes each: 64 MiB): a month of 64 one-minute
 * channels, a whole measurement group, fits, so a monthly report scans each group once.
 */
export const MAX_HELD_SAMPLES = 4_194_304;

type DeviceRow = Pick<Tables['devices'], 'id' | 'site_id' | 'name' | 'model' | 'created_at' | 'deleted_at'>;
type SensorRow = { seq: number } & Pick<
  Tables['sensors'],
  | 'id'
  | 'channel_id'
  | 'device_id'
  | 'kind'
  | 'label'
  | 'unit'
  | 'ok_min'
  | 'ok_max'
  | 'grace_min'
  | 'rule_enabled'
>;

/** The SQL that gathers what a report is drawn from (`report-input.ts`). */
export class ReportDataRepository {
  /** `scan`: the database's way of reading a group's measurements (`groupScan(dialect)`). */
  constructor(scan: GroupScan) {
    this.groupScan = scan;
  }

  /** The site, deleted or not: a report queued before the site was deleted is still made. */
  async site(db: Db, accountId: string, siteId: string): Promise<Tables['sites'] | undefined> {
    return db
      .selectFrom('sites')
      .selectAll()
      .where('id', '=', siteId)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
  }

  async account(db: Db, accountId: string): Promise<Tables['accounts'] | undefined> {
    return db.selectFrom('accounts').selectAll().where('id', '=', accountId).executeTakeFirst();
  }

  /** Every user of the account, by id: audit entries, silences and acknowledgements name users by id. */
  async userEmails(db: Db, accountId: string): Promise<Map<string, string>> {
    const rows = await db
      .selectFrom('users')
      .select(['id', 'email'])
      .where('account_id', '=', accountId)
      .execute();
    return new Map(rows.map((r) => [r.id, r.email]));
  }

  /** Devices that are on the site now or were moved into or out of it, deleted ones included. */
  async devicesEverOnSite(db: Db, accountId: string, siteId: string): Promise<DeviceRow[]> {
    return db
      .selectFrom('devices')
      .select(['id', 'site_id', 'name', 'model', 'created_at', 'deleted_at'])
      .where('account_id', '=', accountId)
      .where((eb) =>
        eb.or([
          eb('site_id', '=', siteId),
          eb(
            'id',
            'in',
            eb
              .selectFrom('device_moves')
              .select('device_id')
              .where('account_id', '=', accountId)
              .where((m) => m.or([m('from_site_id', '=', siteId), m('to_site_id', '=', siteId)])),
          ),
        ]),
      )
      .execute();
  }

  async sensorsOf(db: Db, deviceIds: string[]): Promise<SensorRow[]> {
    if (deviceIds.length === 0) return [];
    return db
      .selectFrom('sensors')
      .select([
        'seq',
        'id',
        'channel_id',
        'device_id',
        'kind',
        'label',
        'unit',
        'ok_min',
        'ok_max',
        'grace_min',
        'rule_enabled',
      ])
      .where('device_id', 'in', deviceIds)
      .execute();
  }

  async ruleVersions(db: Db, seqs: number[]): Promise<Tables['rule_versions'][]> {
    if (seqs.length === 0) return [];
    return db
      .selectFrom('rule_versions')
      .selectAll()
      .where('sensor_seq', 'in', seqs)
      .orderBy('sensor_seq')
      .orderBy('valid_from')
      .execute();
  }

  /** Alarm events of the channels overlapping `[from, to)`, oldest first; withdrawn ones are not part of the record. */
  async alarms(db: Db, seqs: number[], from: number, to: number): Promise<Tables['alarm_events'][]> {
    if (seqs.length === 0) return [];
    return db
      .selectFrom('alarm_events')
      .selectAll()
      .where('sensor_seq', 'in', seqs)
      .where('withdrawn_at', 'is', null)
      .where('started_at', '<', to)
      .where((eb) => eb.or([eb('ended_at', 'is', null), eb('ended_at', '>=', from)]))
      .orderBy('started_at')
      .orderBy('id')
      .execute();
  }

  /**
   * Alert rules' alarm events of the channels overlapping `[from, to)`, oldest first, each with its
   * rule's name (a deleted rule keeps its row, and its events stay part of the record).
   */
  async alertAlarms(db: Db, seqs: number[], from: number, to: number): Promise<AlertAlarmRow[]> {
    if (seqs.length === 0) return [];
    return db
      .selectFrom('alert_events as e')
      .innerJoin('alert_rules as r', 'r.id', 'e.rule_id')
      .selectAll('e')
      .select('r.name as rule_name')
      .where('e.sensor_seq', 'in', seqs)
      .where('e.withdrawn_at', 'is', null)
      .where('e.started_at', '<', to)
      .where((eb) => eb.or([eb('e.ended_at', 'is', null), eb('e.ended_at', '>=', from)]))
      .orderBy('e.started_at')
      .orderBy('e.id')
      .execute();
  }

  /** Silence windows of the channels overlapping `[from, to)` (an ended window up to its end). */
  async silences(db: Db, seqs: number[], from: number, to: number): Promise<Tables['silences'][]> {
    if (seqs.length === 0) return [];
    return db
      .selectFrom('silences')
      .selectAll()
      .where('sensor_seq', 'in', seqs)
      .where('from_ts', '<', to)
      .where('to_ts', '>', from)
      .where((eb) => eb.or([eb('ended_at', 'is', null), eb('ended_at', '>', from)]))
      .orderBy('from_ts')
      .orderBy('id')
      .execute();
  }

  /** Audit entries of these kinds about these targets in `[from, to)`, oldest first. */
  async auditEntries(
    db: Db,
    accountId: string,
    kinds: string[],
    targets: string[],
    from: number,
    to: number,
  ): Promise<Tables['audit_log'][]> {
    if (targets.length === 0) return [];
    return db
      .selectFrom('audit_log')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('kind', 'in', kinds)
      .where('target', 'in', targets)
      .where('ts', '>=', from)
      .where('ts', '<', to)
      .orderBy('ts')
      .orderBy('id')
      .execute();
  }

  /** Moves into or out of the site whose `effective_at` lies in `[from, to)`. */
  async moves(
    db: Db,
    accountId: string,
    siteId: string,
    from: number,
    to: number,
  ): Promise<Tables['device_moves'][]> {
    return db
      .selectFrom('device_moves')
      .selectAll()
      .where('account_id', '=', accountId)
      .where((m) => m.or([m('from_site_id', '=', siteId), m('to_site_id', '=', siteId)]))
      .where('effective_at', '>=', from)
      .where('effective_at', '<', to)
      .orderBy('effective_at')
      .execute();
  }

  async siteNames(db: Db, accountId: string, ids: string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const rows = await db
      .selectFrom('sites')
      .select(['id', 'name'])
      .where('account_id', '=', accountId)
      .where('id', 'in', ids)
      .execute();
    return new Map(rows.map((r) => [r.id, r.name]));
  }

  /**
   * How many readings each channel has in the hours that overlap `[from, to)`, from the hourly
   * rollups: at least the readings in `[from, to)` once the journal is folded (an estimate before).
   */
  async readingCounts(db: Db, seqs: number[], from: number, to: number): Promise<Map<number, number>> {
    if (seqs.length === 0) return new Map();
    const hour = 3_600_000_000;
    const rows = await db
      .selectFrom('measurement_rollups')
      .select(['sensor_seq', (eb) => eb.fn.sum<number>('n').as('n')])
      .where('grp', 'in', [...new Set(seqs.map(rollupGroup))])
      .where('res', '=', 3600)
      .where('sensor_seq', 'in', seqs)
      .where('bucket', '>=', Math.floor(from / hour) * hour)
      .where('bucket', '<', to)
      .groupBy('sensor_seq')
      .execute();
    return new Map(rows.map((r) => [r.sensor_seq, Number(r.n)]));
  }

  /** How the database reads a measurement group's readings (storage/group-scan.ts). */
  readonly groupScan: GroupScan;
}

/** A time interval `[from, to)` in microseconds. */
interface Interval {
  from: number;
  to: number;
}

/**
 * When the device belonged to the site within `[from, to)`: its placement history cut into the
 * stretches between moves (a measurement at `effective_at` already belongs to the new site).
 */
export function intervalsOnSite(
  placement: Placement,
  moves: readonly Pick<Tables['device_moves'], 'effective_at'>[],
  siteId: string,
  from: number,
  to: number,
): Interval[] {
  const cuts = [from, ...moves.map((m) => m.effective_at).filter((t) => t > from && t < to), to];
  const out: Interval[] = [];
  for (let i = 0; i + 1 < cuts.length; i++) {
    const a = cuts[i]!;
    const b = cuts[i + 1]!;
    if (a < b && placement.siteAt(a) === siteId) {
      const last = out[out.length - 1];
      if (last && last.to === a) last.to = b;
      else out.push({ from: a, to: b });
    }
  }
  return out;
}

/** A Float64Array that grows by doubling, for series of unknown length. */
class GrowingSeries {
  private ts: Float64Array;
  private values: Float64Array;
  length = 0;

  /** `capacity`: the expected length, so a series read whole is allocated once. */
  constructor(capacity: number) {
    this.ts = new Float64Array(Math.max(16, capacity));
    this.values = new Float64Array(Math.max(16, capacity));
  }

  push(ts: number, value: number): void {
    if (this.length === this.ts.length) {
      const ts2 = new Float64Array(this.ts.length * 2);
      ts2.set(this.ts);
      this.ts = ts2;
      const v2 = new Float64Array(this.values.length * 2);
      v2.set(this.values);
      this.values = v2;
    }
    this.ts[this.length] = ts;
    this.values[this.length] = value;
    this.length++;
  }

  /** The first `length` elements (views: no copy). */
  done(): ReportSeries {
    return { ts: this.ts.subarray(0, this.length), values: this.values.subarray(0, this.length) };
  }
}

export interface ReportDataDeps {
  db: Db;
  data: ReportDataRepository;
  placements: (
    db: Db,
    devices: Pick<Tables['devices'], 'id' | 'site_id'>[],
  ) => Promise<Map<string, Placement>>;
  movesOf: (db: Db, deviceIds: string[]) => Promise<Tables['device_moves'][]>;
  /**
   * Brings derived state up to date for these channels before they are read: the rollups (folded
   * from ingest's journal) and the rule engine's alarm events.
   */
  settle?: (seqs: readonly number[]) => Promise<void>;
  /** The head of the account's audit hash chain. */
  auditChainHead: (db: Db, accountId: string) => Promise<ReportInput['auditChainHead']>;
  /** The readings the series may hold at once (`MAX_HELD_SAMPLES` unless given). */
  maxHeldSamples?: number;
}

function snapshot(details: unknown): Partial<RuleSnapshot> {
  const d = (details ?? {}) as Record<string, unknown>;
  const out: Partial<RuleSnapshot> = {};
  if (typeof d.rule_enabled === 'boolean') out.enabled = d.rule_enabled;
  if (typeof d.ok_min === 'number') out.okMin = d.ok_min;
  if (typeof d.ok_max === 'number') out.okMax = d.ok_max;
  if (typeof d.grace_min === 'number') out.graceMin = d.grace_min;
  return out;
}

/** What changed: the fields whose value differs between `before` and `after`. */
function changedFields(
  before: Partial<RuleSnapshot>,
  after: Partial<RuleSnapshot>,
): { before: Partial<RuleSnapshot>; after: Partial<RuleSnapshot> } {
  const b: Partial<RuleSnapshot> = {};
  const a: Partial<RuleSnapshot> = {};
  for (const key of ['enabled', 'okMin', 'okMax', 'graceMin'] as const) {
    if (before[key] !== after[key]) {
      (b as Record<string, unknown>)[key] = before[key];
      (a as Record<string, unknown>)[key] = after[key];
    }
  }
  return { before: b, after: a };
}

/**
 * Gathers everything the renderer needs for `report` from the database: the site and account, the
 * channels that belonged to the site during the period (a device's moves split its data between
 * sites at `effective_at`; deleted devices are included for their lifetime), the rule in force over
 * time, alarms, silences, threshold changes, recomputes and moves, and `series()`, which reads the
 * measurements of the channels the template draws (`SeriesLoader`).
 */
export async function gatherReportInput(deps: ReportDataDeps, report: ReportRow): Promise<ReportInput> {
  const { db, data } = deps;
  const { account_id: accountId, site_id: siteId, period_from: from, period_to: to } = report;
  const site = await data.site(db, accountId, siteId);
  if (!site) throw new Error(`site ${siteId} no longer exists`);
  const account = await data.account(db, accountId);
  const emails = await data.userEmails(db, accountId);
  const who = (id: string) => emails.get(id) ?? id;

  const devices = (await data.devicesEverOnSite(db, accountId, siteId)).filter(
    (d) => d.deleted_at === null || d.deleted_at > from,
  );
  const placements = await deps.placements(db, devices);
  const allMoves = await deps.movesOf(
    db,
    devices.map((d) => d.id),
  );
  const intervals = new Map<string, Interval[]>();
  for (const d of devices) {
    const own = allMoves.filter((m) => m.device_id === d.id);
    const upTo = d.deleted_at === null ? to : Math.min(to, d.deleted_at);
    // A deleted device's data stays where it was measured; it has no data after deletion.
    const on = intervalsOnSite(placements.get(d.id)!, own, siteId, from, Math.max(from, upTo));
    if (on.length > 0) intervals.set(d.id, on);
  }
  const deviceById = new Map(devices.map((d) => [d.id, d]));
  let found = await data.sensorsOf(db, [...intervals.keys()]);
  // Everything answered before the report is in it: ingest's journal folded, alarms evaluated.
  await deps.settle?.(found.map((s) => s.seq));
  // A device added after the period is in it only with readings of the period (a backfill).
  const later = found.filter((s) => deviceById.get(s.device_id)!.created_at >= to);
  if (later.length > 0) {
    const counts = await data.readingCounts(
      db,
      later.map((s) => s.seq),
      from,
      to,
    );
    const withData = new Set(later.filter((s) => (counts.get(s.seq) ?? 0) > 0).map((s) => s.device_id));
    found = found.filter((s) => deviceById.get(s.device_id)!.created_at < to || withData.has(s.device_id));
  }
  const sensors = found.sort((a, b) => {
    const da = deviceById.get(a.device_id)!;
    const dbb = deviceById.get(b.device_id)!;
    return (
      da.name.localeCompare(dbb.name) ||
      da.id.localeCompare(dbb.id) ||
      a.kind.localeCompare(b.kind) ||
      (a.label ?? '').localeCompare(b.label ?? '')
    );
  });
  const seqs = sensors.map((s) => s.seq);

  const versions = new Map<number, Tables['rule_versions'][]>();
  for (const v of await data.ruleVersions(db, seqs)) {
    const list = versions.get(v.sensor_seq) ?? [];
    list.push(v);
    versions.set(v.sensor_seq, list);
  }
  const channels: ReportChannel[] = sensors.map((s) => {
    const device = deviceById.get(s.device_id)!;
    const history = versions.get(s.seq) ?? [];
    let rules: RuleSegment[];
    if (history.length === 0) {
      rules = [
        { from, enabled: s.rule_enabled === 1, okMin: s.ok_min, okMax: s.ok_max, graceMin: s.grace_min },
      ];
    } else {
      // The version in force at the period's start, then every later one that starts before its end.
      let first = 0;
      for (let i = 0; i < history.length; i++) if (history[i]!.valid_from <= from) first = i;
      rules = history
        .slice(first)
        .filter((v, i) => i === 0 || v.valid_from < to)
        .map((v, i) => ({
          from: i === 0 ? Math.min(from, Math.max(v.valid_from, from)) : v.valid_from,
          enabled: v.rule_enabled === 1,
          okMin: v.ok_min,
          okMax: v.ok_max,
          graceMin: v.grace_min,
        }));
    }
    return {
      channelId: s.channel_id,
      sensorId: s.id,
      deviceId: s.device_id,
      deviceName: device.name,
      deviceModel: device.model,
      deviceDeletedAt: device.deleted_at,
      kind: s.kind,
      label: s.label,
      unit: s.unit,
      rules,
    };
  });

  const bySeq = new Map(sensors.map((s) => [s.seq, s]));
  const onSiteAt = (deviceId: string, ts: number) =>
    (intervals.get(deviceId) ?? []).some((i) => ts >= i.from && ts < i.to) ||
    placements.get(deviceId)?.siteAt(ts) === siteId;

  const onSiteAtStart = (e: { device_id: string; started_at: number }) =>
    placements.get(e.device_id)?.siteAt(e.started_at) === siteId;
  const alarmOf = (e: Tables['alarm_events'] | AlertAlarmRow): ReportAlarm => ({
    eventId: e.id,
    channelId: e.channel_id,
    kind: e.kind,
    startedAt: e.started_at,
    alarmAt: e.alarm_at,
    endedAt: e.ended_at,
    okMin: 'ok_min' in e ? e.ok_min : null,
    okMax: 'ok_max' in e ? e.ok_max : null,
    peakValue: e.peak_value,
    silenced: e.silenced === 1,
    acknowledgedAt: e.acknowledged_at,
    acknowledgedBy: e.acknowledged_by === null ? null : who(e.acknowledged_by),
    ackNote: e.ack_note,
    rule: 'rule_name' in e ? { name: e.rule_name, severity: e.severity } : null,
  });
  const alarms: ReportAlarm[] = [
    ...(await data.alarms(db, seqs, from, to)),
    ...(await data.alertAlarms(db, seqs, from, to)),
  ]
    .filter(onSiteAtStart)
    .map(alarmOf)
    .sort((a, b) => a.startedAt - b.startedAt || (a.eventId < b.eventId ? -1 : 1));

  const silences: ReportSilence[] = (await data.silences(db, seqs, from, to))
    .filter((s) => {
      const sensor = bySeq.get(s.sensor_seq);
      return sensor !== undefined && onSiteAt(sensor.device_id, Math.max(from, s.from_ts));
    })
    .map((s) => ({
      silenceId: s.id,
      channelId: bySeq.get(s.sensor_seq)!.channel_id,
      from: s.from_ts,
      to: s.ended_at === null ? s.to_ts : Math.min(s.to_ts, s.ended_at),
      reason: s.reason,
      createdBy: who(s.created_by),
      createdAt: s.created_at,
    }));

  const sensorById = new Map(sensors.map((s) => [s.id, s]));
  const entries = await data.auditEntries(
    db,
    accountId,
    ['threshold.changed', 'sensor.recomputed'],
    sensors.map((s) => s.id),
    from,
    to,
  );
  const thresholdChanges: ReportThresholdChange[] = [];
  const recomputes: ReportRecompute[] = [];
  for (const entry of entries) {
    const sensor = sensorById.get(entry.target)!;
    if (!onSiteAt(sensor.device_id, entry.ts)) continue;
    const details = JSON.parse(entry.details) as Record<string, unknown>;
    if (entry.kind === 'threshold.changed') {
      thresholdChanges.push({
        ts: entry.ts,
        by: who(entry.actor),
        channelId: sensor.channel_id,
        ...changedFields(snapshot(details.before), snapshot(details.after)),
      });
    } else {
      recomputes.push({
        ts: entry.ts,
        by: who(entry.actor),
        channelId: sensor.channel_id,
        replayed: Number(details.replayed ?? 0),
        eventsCreated: Number(details.events_created ?? 0),
      });
    }
  }

  const moveRows = await data.moves(db, accountId, siteId, from, to);
  const movedDevices = await data.devicesEverOnSite(db, accountId, siteId);
  const deviceNames = new Map(movedDevices.map((d) => [d.id, d.name]));
  const siteNames = await data.siteNames(db, accountId, [
    ...new Set(moveRows.flatMap((m) => [m.from_site_id, m.to_site_id])),
  ]);
  const moves: ReportMove[] = moveRows.map((m) => ({
    ts: m.created_at,
    by: who(m.created_by),
    deviceId: m.device_id,
    deviceName: deviceNames.get(m.device_id) ?? m.device_id,
    fromSiteId: m.from_site_id,
    toSiteId: m.to_site_id,
    fromSiteName: siteNames.get(m.from_site_id) ?? m.from_site_id,
    toSiteName: siteNames.get(m.to_site_id) ?? m.to_site_id,
    effectiveAt: m.effective_at,
  }));

  const drawn = new Set(
    reportedChannels(report.template as ReportInput['report']['template'], channels).map((c) => c.channelId),
  );
  const loader = new SeriesLoader(
    db,
    data,
    sensors
      .filter((s) => drawn.has(s.channel_id))
      .map((s) => ({ seq: s.seq, channelId: s.channel_id, intervals: intervals.get(s.device_id)! })),
    from,
    to,
    deps.maxHeldSamples,
  );

  return {
    report: {
      id: report.id,
      template: report.template as ReportInput['report']['template'],
      language: report.language as ReportInput['report']['language'],
      createdAt: report.created_at,
      from,
      to,
    },
    account: { id: accountId, name: account?.name ?? accountId },
    site: { id: site.id, name: site.name, timezone: site.timezone, vertical: site.vertical },
    auditChainHead: await deps.auditChainHead(db, accountId),
    channels,
    alarms,
    silences,
    thresholdChanges,
    recomputes,
    moves,
    series: (channelId) => loader.series(channelId),
  };
}

interface SeriesChannel {
  seq: number;
  channelId: string;
  /** When the channel's device was on the site within the period. */
  intervals: Interval[];
}

/**
 * Loads the series of the channels a template draws, in the order it asks for them, a measurement
 * group's scan at a time. The first request for a channel reads, in one ordered scan of its group,
 * that channel and the ones after it in the asking order that share its group, as long as their
 * readings (counted by the hourly rollups) together with the series already held stay within
 * `maxHeldSamples`; it keeps those series until they are asked for and hands each out once (asked
 * again, it is read again). So what is held at once is the series about to be drawn, bounded by
 * the budget (a single series larger than the budget is read alone), and a group whose drawn
 * channels fit the budget is scanned once. Channels the template does not draw are never read.
 */
class SeriesLoader {
  private readonly position: Map<string, number>;
  private readonly held = new Map<string, ReportSeries>();
  private heldSamples = 0;
  /** Each channel's readings in the period's hours (upper bounds), read on the first load. */
  private counts: Map<number, number> | undefined;

  /** `channels`: the channels the template draws, in the order it asks for their series. */
  constructor(
    private readonly db: Db,
    private readonly data: ReportDataRepository,
    private readonly channels: readonly SeriesChannel[],
    private readonly from: number,
    private readonly to: number,
    private readonly maxHeldSamples: number = MAX_HELD_SAMPLES,
  ) {
    this.position = new Map(channels.map((c, i) => [c.channelId, i]));
  }

  async series(channelId: string): Promise<ReportSeries> {
    const at = this.position.get(channelId);
    if (at === undefined) return { ts: new Float64Array(0), values: new Float64Array(0) };
    let found = this.held.get(channelId);
    if (!found) {
      await this.load(at);
      found = this.held.get(channelId)!;
    }
    this.held.delete(channelId);
    this.heldSamples -= found.ts.length;
    return found;
  }

  /** Reads the channel at `at` and those after it that its group's scan can bring within the budget. */
  private async load(at: number): Promise<void> {
    this.counts ??= await this.data.readingCounts(
      this.db,
      this.channels.map((c) => c.seq),
      this.from,
      this.to,
    );
    const first = this.channels[at]!;
    const grp = measurementGroup(first.seq);
    const members = [first];
    let planned = this.heldSamples + (this.counts.get(first.seq) ?? 0);
    for (let i = at + 1; i < this.channels.length; i++) {
      const c = this.channels[i]!;
      if (measurementGroup(c.seq) !== grp || this.held.has(c.channelId)) continue;
      const n = this.counts.get(c.seq) ?? 0;
      if (planned + n > this.maxHeldSamples) break;
      members.push(c);
      planned += n;
    }
    for (const s of await this.readGroup(grp, members)) {
      this.held.set(s.channelId, s.series);
      this.heldSamples += s.series.ts.length;
    }
  }

  private async readGroup(
    grp: number,
    members: SeriesChannel[],
  ): Promise<{ channelId: string; series: ReportSeries }[]> {
    const from = Math.min(...members.map((c) => c.intervals[0]!.from));
    const to = Math.max(...members.map((c) => c.intervals[c.intervals.length - 1]!.to));
    const scanFrom = Math.max(from, this.from);
    const scanTo = Math.min(to, this.to);
    // The hourly rollups count each channel's readings over the scanned span (an upper bound over
    // whole hours), so each series is allocated once at about its final size.
    const counts = await this.data.readingCounts(
      this.db,
      members.map((c) => c.seq),
      scanFrom,
      scanTo,
    );
    const state = new Map(
      members.map((c) => [
        c.seq,
        { channel: c, series: new GrowingSeries(counts.get(c.seq) ?? 0), interval: 0 },
      ]),
    );
    // A window at a time, sized from the counts so that each query covers about the readings the
    // database reads well at once (the counts are upper bounds, so usually fewer): what one query
    // answers is held at once, and the series are the only thing that grows with the period.
    let expected = 0;
    for (const c of members) expected += counts.get(c.seq) ?? 0;
    const window = Math.max(
      MIN_SCAN_WINDOW,
      Math.floor(((scanTo - scanFrom) * this.data.groupScan.readingsPerQuery) / Math.max(1, expected)),
    );
    const seqs = members.map((c) => c.seq);
    for (let start = scanFrom; start < scanTo; start += window) {
      await this.data.groupScan.read(
        this.db,
        grp,
        seqs,
        start,
        Math.min(start + window, scanTo),
        (seq, ts, value) => {
          const s = state.get(seq)!;
          const iv = s.channel.intervals;
          while (s.interval < iv.length && iv[s.interval]!.to <= ts) s.interval++;
          if (s.interval < iv.length && ts >= iv[s.interval]!.from) s.series.push(ts, value);
        },
      );
    }
    return [...state.values()].map((s) => ({ channelId: s.channel.channelId, series: s.series.done() }));
  }
}
