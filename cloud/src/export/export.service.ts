import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ZipArchive } from 'archiver';
import { formatMicros, formatSeconds, formatSecondsOrNull } from '../../../shared/time.ts';
import { auditDetailsJson } from '../audit/audit.view.ts';
import type { Clock } from '../clock.ts';
import type { DeviceMovesService } from '../devices/moves.service.ts';
import type { MeasurementsRepository } from '../measurements/measurements.repository.ts';
import { csvLines } from '../measurements/csv.ts';
import type { MeasurementsService } from '../measurements/measurements.service.ts';
import { retentionCutoff } from '../retention/retention.ts';
import type { Config } from '../config.ts';
import type { Db } from '../storage/database.ts';
import type { ExportRepository } from './export.repository.ts';

/** Rows per query for audit entries and events. */
const PAGE = 5_000;

interface Column {
  name: string;
  type: string;
  description: string;
}

/** The column schemas, written to meta.json (docs/api/reads.md). */
export const EXPORT_COLUMNS: Record<'measurements.csv' | 'events.csv' | 'audit.csv', Column[]> = {
  'measurements.csv': [
    { name: 'ts', type: 'timestamp', description: 'RFC 3339 UTC with microseconds' },
    { name: 'channel_id', type: 'string', description: 'chn_ id of the channel' },
    { name: 'sensor_id', type: 'string', description: 'snr_ id of the sensor' },
    { name: 'device_id', type: 'string', description: 'dev_ id of the device (deleted devices included)' },
    {
      name: 'site_id',
      type: 'string',
      description: 'the device’s site at ts (moves partition by effective_at)',
    },
    { name: 'type', type: 'string', description: 'measurement kind' },
    { name: 'label', type: 'string', description: 'label of the channel, empty when none' },
    { name: 'unit', type: 'string', description: 'unit of the channel' },
    { name: 'value', type: 'number', description: 'value as stored' },
  ],
  'events.csv': [
    { name: 'id', type: 'string', description: 'evt_ id' },
    {
      name: 'kind',
      type: 'string',
      description: 'threshold_high, threshold_low, no_data, or rate_of_change (alert rules only)',
    },
    { name: 'state', type: 'string', description: 'open or resolved' },
    { name: 'sensor_id', type: 'string', description: 'snr_ id' },
    { name: 'channel_id', type: 'string', description: 'chn_ id' },
    { name: 'device_id', type: 'string', description: 'dev_ id' },
    { name: 'site_id', type: 'string', description: 'site_ id' },
    { name: 'started_at', type: 'timestamp', description: 'first out-of-range sample (RFC 3339 UTC)' },
    { name: 'alarm_at', type: 'timestamp', description: 'when the excursion became an alarm' },
    { name: 'ended_at', type: 'timestamp', description: 'first sample back in range; empty while open' },
    {
      name: 'ok_min',
      type: 'number',
      description: "lower bound of the sensor's rule at the time; empty for an alert rule's event",
    },
    {
      name: 'ok_max',
      type: 'number',
      description: "upper bound of the sensor's rule at the time; empty for an alert rule's event",
    },
    {
      name: 'peak_value',
      type: 'number',
      description: 'most extreme value of the excursion; empty for no_data',
    },
    { name: 'silenced', type: 'boolean', description: 'true when a silence window covered it' },
    { name: 'acknowledged_at', type: 'timestamp', description: 'empty when not acknowledged' },
    { name: 'acknowledged_by', type: 'string', description: 'usr_ id; empty when not acknowledged' },
    { name: 'ack_note', type: 'string', description: 'acknowledgement note' },
    {
      name: 'rule_id',
      type: 'string',
      description: "alr_ id of the alert rule that raised it; empty for the sensor's own rule",
    },
    {
      name: 'severity',
      type: 'string',
      description: "warning or critical (alert rules); empty for the sensor's own rule",
    },
  ],
  'audit.csv': [
    { name: 'id', type: 'string', description: 'aud_ id' },
    { name: 'ts', type: 'timestamp', description: 'RFC 3339 UTC' },
    { name: 'kind', type: 'string', description: 'audit kind, e.g. threshold.changed' },
    { name: 'by', type: 'string', description: 'usr_ id, or system' },
    { name: 'target', type: 'string', description: 'id of the object acted on' },
    { name: 'details', type: 'json', description: 'details object as JSON text' },
  ],
};

/**
 * A CSV entry read lazily: each page of rows is fetched only when the archive wants more bytes, and
 * turned into CSV text a page at a time.
 */
function csvEntry(name: keyof typeof EXPORT_COLUMNS, pages: AsyncIterable<unknown[][]>): Readable {
  return Readable.from(
    (async function* () {
      yield csvLines([EXPORT_COLUMNS[name].map((c) => c.name)]);
      for await (const rows of pages) yield csvLines(rows);
    })(),
    { objectMode: false },
  );
}

async function* keyset<R>(
  page: (after: readonly [number, string] | null) => Promise<R[]>,
  keyOf: (row: R) => readonly [number, string],
): AsyncGenerator<R[]> {
  let after: readonly [number, string] | null = null;
  for (;;) {
    const rows = await page(after);
    if (rows.length > 0) yield rows;
    if (rows.length < PAGE) return;
    after = keyOf(rows[rows.length - 1]!);
  }
}

/**
 * `POST /v1/accounts/me/export`: one ZIP streamed as it is built (archiver, papaparse), with
 * measurements.csv, events.csv, audit.csv and meta.json at the archive's root. Every table is read
 * in pages and the archive is written with backpressure, so memory stays flat however large the
 * account. The export is not a snapshot: rows written while it runs may or may not be in it.
 */
export class ExportService {
  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      config: Config;
      exports: ExportRepository;
      measurementsRepository: MeasurementsRepository;
      measurements: MeasurementsService;
      deviceMoves: DeviceMovesService;
    },
  ) {}

  /**
   * Streams the ZIP into `out`; rejects when a query fails on the way (the archive is then
   * destroyed, and the caller cuts the connection: a ZIP cut short never looks complete).
   */
  async write(accountId: string, out: Writable): Promise<void> {
    const archive = new ZipArchive({ zlib: { level: 6 } });
    const done = pipeline(archive, out);
    // archiver pipes each entry into itself, and a pipe does not carry its source's errors on:
    // without this, a failed page query is an error event nobody hears, which ends the process.
    const entry = (source: Readable, name: string) => {
      source.once('error', (err) => archive.destroy(err));
      archive.append(source, { name });
    };
    entry(csvEntry('measurements.csv', this.measurementRows(accountId)), 'measurements.csv');
    entry(csvEntry('events.csv', this.eventRows(accountId)), 'events.csv');
    entry(csvEntry('audit.csv', this.auditRows(accountId)), 'audit.csv');
    archive.append(JSON.stringify(this.meta(accountId), null, 2), { name: 'meta.json' });
    await Promise.all([archive.finalize(), done]);
  }

  private meta(accountId: string) {
    return {
      format_version: 1,
      account_id: accountId,
      generated_at: formatSeconds(this.deps.clock.nowMicros()),
      files: Object.fromEntries(Object.entries(EXPORT_COLUMNS).map(([name, columns]) => [name, { columns }])),
    };
  }

  private async *measurementRows(accountId: string): AsyncGenerator<unknown[][]> {
    const { db, clock, config, exports, measurementsRepository, measurements, deviceMoves } = this.deps;
    const channels = await measurementsRepository.listChannels(
      db,
      accountId,
      retentionCutoff(config, clock.nowMicros()),
    );
    const placements = await deviceMoves.placements(db, await exports.devices(db, accountId));
    for (const c of channels) {
      const placement = placements.get(c.device_id);
      const all = {
        from: Number.MIN_SAFE_INTEGER,
        to: Number.MAX_SAFE_INTEGER,
        width: null,
        fn: 'mean' as const,
      };
      for await (const chunk of measurements.stream(c.seq, all)) {
        yield chunk.map((p) => [
          formatMicros(p.ts),
          c.channel_id,
          c.id,
          c.device_id,
          placement ? placement.siteAt(p.ts) : c.site_id,
          c.kind,
          c.label ?? '',
          c.unit,
          p.value,
        ]);
      }
    }
  }

  private async *eventRows(accountId: string): AsyncGenerator<unknown[][]> {
    const { db, exports } = this.deps;
    const rows = keyset(
      (after) => exports.eventsPage(db, accountId, after, PAGE),
      (e) => [e.started_at, e.id],
    );
    for await (const page of rows) {
      yield page.map((e) => [
        e.id,
        e.kind,
        e.ended_at === null ? 'open' : 'resolved',
        e.sensor_id,
        e.channel_id,
        e.device_id,
        e.site_id,
        formatSeconds(e.started_at),
        formatSeconds(e.alarm_at),
        formatSecondsOrNull(e.ended_at) ?? '',
        e.ok_min ?? '',
        e.ok_max ?? '',
        e.peak_value ?? '',
        e.silenced === 1 ? 'true' : 'false',
        formatSecondsOrNull(e.acknowledged_at) ?? '',
        e.acknowledged_by ?? '',
        e.ack_note ?? '',
        e.rule_id ?? '',
        e.severity ?? '',
      ]);
    }
  }

  private async *auditRows(accountId: string): AsyncGenerator<unknown[][]> {
    const { db, exports } = this.deps;
    const rows = keyset(
      (after) => exports.auditPage(db, accountId, after, PAGE),
      (a) => [a.ts, a.id],
    );
    // The details as the audit API shows them (an alert rule's chat URLs masked).
    for await (const page of rows)
      yield page.map((a) => [a.id, formatSeconds(a.ts), a.kind, a.actor, a.target, auditDetailsJson(a)]);
  }
}
