/**
 * What a report is drawn from: everything the renderer needs, gathered by the report service from
 * the database. The renderer (`report-pdf.ts`) is a pure function of this object, so the same data
 * gives the same bytes and the report's `sha256` means something.
 *
 * Times are integer microseconds since the Unix epoch (as stored); the renderer turns them into the
 * site's local time. Series are loaded one channel at a time through `series()`, so a month of
 * 1-minute data for 50 channels never sits in memory at once.
 */

export const REPORT_TEMPLATES = ['haccp_monthly', 'channel_summary'] as const;
export type ReportTemplate = (typeof REPORT_TEMPLATES)[number];

export const REPORT_LANGUAGES = ['en', 'de', 'fr'] as const;
export type ReportLanguage = (typeof REPORT_LANGUAGES)[number];

/**
 * The channels `template` reports, in the order it asks for their series and draws them:
 * `haccp_monthly` the temperature channels, `channel_summary` every channel. The data gathering
 * loads the series of these channels only.
 */
export function reportedChannels<C extends Pick<ReportChannel, 'kind'>>(
  template: ReportTemplate,
  channels: readonly C[],
): C[] {
  return channels.filter((c) => template !== 'haccp_monthly' || c.kind === 'temperature');
}

export interface ReportInput {
  report: {
    id: string;
    template: ReportTemplate;
    language: ReportLanguage;
    /** The report's `created_at`: printed as "generated at" and the PDF's creation date. */
    createdAt: number;
    /** The period, `from` inclusive, `to` exclusive. */
    from: number;
    to: number;
  };
  account: { id: string; name: string };
  site: { id: string; name: string; timezone: string; vertical: string };
  /** The head of the account's audit hash chain when the report was generated. */
  auditChainHead: { entryId: string | null; hash: string | null; entries: number };
  /**
   * Every channel that belonged to the site during some part of the period, deleted devices included
   * (sorted by device name, then kind, then label). The template picks the kinds it reports.
   */
  channels: ReportChannel[];
  /** Alarm events of these channels that overlap the period, oldest first. */
  alarms: ReportAlarm[];
  /** Silence windows of these channels that overlap the period, oldest first. */
  silences: ReportSilence[];
  /** `threshold.changed` audit entries of these channels within the period, oldest first. */
  thresholdChanges: ReportThresholdChange[];
  /** `sensor.recomputed` audit entries of these channels within the period, oldest first. */
  recomputes: ReportRecompute[];
  /** Moves of devices into or out of the site whose `effective_at` lies within the period. */
  moves: ReportMove[];
  /**
   * The channel's measurements with `from <= ts < to` taken while its device belonged to this site
   * (a move's `effective_at` splits the data between the old and the new site), ascending by `ts`.
   * The renderer asks for the channels of `reportedChannels()` once each, in that order; the loader
   * reads ahead in that order and holds only series still to be asked for.
   */
  series(channelId: string): Promise<ReportSeries>;
}

export interface ReportChannel {
  channelId: string;
  sensorId: string;
  deviceId: string;
  deviceName: string;
  deviceModel: string;
  /** When the device was deleted, if it was; its data is still reported for its lifetime. */
  deviceDeletedAt: number | null;
  /** `temperature`, `humidity`, `co2`, `battery`, ... */
  kind: string;
  label: string | null;
  unit: string;
  /**
   * The simple rule over time: each segment is in force from its `from` until the next segment's
   * `from`. The first segment's `from` is at or before the period's start.
   */
  rules: RuleSegment[];
}

export interface RuleSegment {
  from: number;
  enabled: boolean;
  okMin: number;
  okMax: number;
  graceMin: number;
}

export interface ReportSeries {
  /** Microseconds since the epoch, ascending. */
  ts: Float64Array;
  values: Float64Array;
}

export interface ReportAlarm {
  eventId: string;
  channelId: string;
  kind: string;
  startedAt: number;
  alarmAt: number | null;
  endedAt: number | null;
  okMin: number | null;
  okMax: number | null;
  peakValue: number | null;
  silenced: boolean;
  acknowledgedAt: number | null;
  /** The acknowledging user's e-mail, or null. */
  acknowledgedBy: string | null;
  ackNote: string | null;
  /** The alert rule that raised it; null for the sensor's own rule. */
  rule: { name: string; severity: 'warning' | 'critical' } | null;
}

export interface ReportSilence {
  silenceId: string;
  channelId: string;
  from: number;
  to: number;
  reason: string | null;
  /** The e-mail of the user (or the token's label) that set it. */
  createdBy: string;
  createdAt: number;
}

export interface RuleSnapshot {
  enabled: boolean;
  okMin: number;
  okMax: number;
  graceMin: number;
}

export interface ReportThresholdChange {
  ts: number;
  by: string;
  channelId: string;
  before: Partial<RuleSnapshot>;
  after: Partial<RuleSnapshot>;
}

export interface ReportRecompute {
  ts: number;
  by: string;
  channelId: string;
  replayed: number;
  eventsCreated: number;
}

export interface ReportMove {
  /** When the move was made (the audit entry's time). */
  ts: number;
  by: string;
  deviceId: string;
  deviceName: string;
  /** The sites by id (whether the device moved into or out of this site), and by name (printed). */
  fromSiteId: string;
  toSiteId: string;
  fromSiteName: string;
  toSiteName: string;
  effectiveAt: number;
}
