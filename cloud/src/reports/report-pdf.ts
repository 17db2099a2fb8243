/**
 * The report as a PDF: a pure function of its `ReportInput`. pdfkit draws everything as vector text
 * and paths, with the DejaVu fonts embedded (subset) so every language and symbol (°, µ, ‰, CO₂)
 * prints the same everywhere. The document's dates and file ID come from the report's `created_at`,
 * so the same input gives the same bytes.
 *
 * Series are loaded one channel at a time: each is reduced to its statistics and a chart trace of at
 * most two points per plot column, then let go before the next one is loaded.
 */
import { createRequire } from 'node:module';
import { DateTime } from 'luxon';
import PDFDocument from 'pdfkit';
import { chartColumns, downsample, drawChart, type ChartBand, type Trace } from './report-chart.ts';
import { ReportText } from './report-i18n.ts';
import {
  reportedChannels,
  type ReportAlarm,
  type ReportChannel,
  type ReportInput,
  type RuleSnapshot,
} from './report-input.ts';
import { Layout, PAGE, type Column, type Row } from './report-layout.ts';
import {
  channelStats,
  GAP_FACTOR,
  localDayBounds,
  presenceWindow,
  segmentsInForce,
  type ChannelStats,
} from './report-stats.ts';

const require = createRequire(import.meta.url);
const FONT_FILES = {
  regular: require.resolve('dejavu-fonts-ttf/ttf/DejaVuSans.ttf'),
  bold: require.resolve('dejavu-fonts-ttf/ttf/DejaVuSans-Bold.ttf'),
};
const FONTS = { regular: 'DejaVuSans', bold: 'DejaVuSans-Bold' };

const US_PER_MS = 1000;
const CHART_HEIGHT = 175;
/** Excursions listed per channel; beyond, the shortest are counted in one line. */
export const MAX_EXCURSION_ROWS = 200;

/** A channel the template reports, with what was computed from its series. */
interface ChannelReport {
  channel: ReportChannel;
  stats: ChannelStats;
  trace: Trace;
  decimals: number;
}

/** Renders the report to PDF bytes. */
export async function renderReport(input: ReportInput): Promise<Buffer> {
  const text = new ReportText(input.report.language, input.site.timezone);
  const haccp = input.report.template === 'haccp_monthly';
  const title = haccp ? text.t('titleHaccp') : text.t('titleSummary');

  const selected = reportedChannels(input.report.template, input.channels);
  const reports: ChannelReport[] = [];
  for (const channel of selected) {
    reports.push(await analyseChannel(input, channel));
  }

  const created = new Date(Math.floor(input.report.createdAt / US_PER_MS));
  const doc = new PDFDocument({
    size: 'A4',
    margins: { top: 20, bottom: 20, left: PAGE.margin, right: PAGE.margin },
    bufferPages: true,
    lang: input.report.language,
    displayTitle: true,
    info: {
      Title: `${title} – ${input.site.name} – ${text.date(input.report.from)} – ${text.date(input.report.to - 1)}`,
      Author: input.account.name,
      Subject: `${text.templateName(input.report.template)} ${input.report.id}`,
      Keywords: input.report.id,
      Creator: 'Sensor monitoring cloud',
      CreationDate: created,
      ModDate: created,
    },
  });
  joinFinishedPages(doc);
  const chunks: Buffer[] = [];
  doc.on('data', (chunk: Buffer) => chunks.push(chunk));
  const ended = new Promise<void>((resolve, reject) => {
    doc.on('end', resolve);
    doc.on('error', reject);
  });
  doc.registerFont(FONTS.regular, FONT_FILES.regular);
  doc.registerFont(FONTS.bold, FONT_FILES.bold);

  const layout = new Layout(doc, FONTS);
  drawCover(layout, input, text, title);
  layout.space(10);
  drawSummary(layout, input, text, reports);

  if (haccp) {
    for (const r of reports) drawChannelPage(layout, input, text, r, true);
    drawSections(layout, input, text);
    drawSignature(layout, text);
  } else {
    layout.newPage();
    for (const r of reports) drawChannelPage(layout, input, text, r, false);
    drawAudit(layout, input, text);
  }

  drawPageFurniture(doc, input, text, title);
  doc.end();
  await ended;
  return Buffer.concat(chunks);
}

/** A page's content stream as pdfkit holds it until the document ends (`bufferPages`). */
interface BufferedContent {
  buffer: Uint8Array[];
}

/**
 * Joins each page's content chunks into one buffer once the next page starts. pdfkit keeps every
 * drawing operation of a page as a small Uint8Array of its own until the document ends (the page
 * furniture needs the page count, hence `bufferPages`), and those objects outweigh the bytes by far
 * (about 40 MB for a month of 50 charts and tables). pdfkit joins the chunks itself when it writes
 * the stream, so the PDF's bytes are the same; later writes to the page append after the joined one.
 */
function joinFinishedPages(doc: PDFKit.PDFDocument): void {
  let page = (doc as unknown as { page: { content: BufferedContent } }).page;
  doc.on('pageAdded', () => {
    const content = page.content;
    if (content.buffer.length > 1) content.buffer = [Buffer.concat(content.buffer)];
    page = (doc as unknown as { page: { content: BufferedContent } }).page;
  });
}

async function analyseChannel(input: ReportInput, channel: ReportChannel): Promise<ChannelReport> {
  const series = await input.series(channel.channelId);
  const window = presenceWindow(input, channel);
  const stats = channelStats(series, {
    timezone: input.site.timezone,
    from: input.report.from,
    to: input.report.to,
    windowFrom: window.from,
    windowTo: window.to,
    rules: channel.rules,
    alarms: input.alarms.filter((a) => a.channelId === channel.channelId),
  });
  const gap = stats.usualIntervalUs === null ? 0 : stats.usualIntervalUs * GAP_FACTOR;
  const trace = downsample(
    series,
    input.report.from,
    input.report.to,
    chartColumns(PAGE.width - 2 * PAGE.margin),
    gap,
  );
  return { channel, stats, trace, decimals: decimalsFor(channel, stats) };
}

/** Temperatures print with one decimal; other kinds with as many as their magnitude needs. */
function decimalsFor(channel: ReportChannel, stats: ChannelStats): number {
  if (channel.kind === 'temperature') return 1;
  const magnitude = Math.max(Math.abs(stats.min ?? 0), Math.abs(stats.max ?? 0));
  return magnitude < 10 ? 2 : magnitude < 1000 ? 1 : 0;
}

function channelName(text: ReportText, channel: ReportChannel): string {
  return `${channel.deviceName} / ${channel.label ?? text.kindName(channel.kind)}`;
}

function withUnit(value: string, unit: string): string {
  return unit ? `${value} ${unit}` : value;
}

/** The rule segments in force in the period, one a line; `compact` dates a change by day and time only. */
function rulesText(
  input: ReportInput,
  text: ReportText,
  channel: ReportChannel,
  decimals: number,
  compact = false,
): string {
  const segments = segmentsInForce(channel.rules, input.report.from, input.report.to);
  if (segments.length === 0) return text.t('noRule');
  return segments
    .map((s, i) => {
      const range = s.enabled
        ? `${text.number(s.okMin, decimals)} – ${text.number(s.okMax, decimals)}`
        : text.t('noRule');
      return i === 0 || s.from <= input.report.from
        ? range
        : `${text.t('sinceDate', { date: compact ? `${text.dayMonth(s.from)} ${text.time(s.from)}` : text.dateTime(s.from) })}: ${range}`;
    })
    .join('\n');
}

/** The distinct UTC offsets of the site within the period, with the local day of each change. */
function offsetsInPeriod(input: ReportInput, text: ReportText): string {
  const zone = input.site.timezone;
  const offsetAt = (us: number): number => DateTime.fromMillis(Math.floor(us / US_PER_MS), { zone }).offset;
  const bounds = localDayBounds(input.report.from, input.report.to, zone);
  const parts = [text.utcOffset(input.report.from)];
  let last = offsetAt(input.report.from);
  for (let i = 1; i < bounds.length; i++) {
    const at = Math.min(bounds[i]!, input.report.to - 1);
    const offset = offsetAt(at);
    if (offset !== last) {
      const day = bounds[i - 1]!;
      parts.push(
        `${text.utcOffset(at)} (${text.t('dstChange')} ${text.date(Math.max(day, input.report.from))})`,
      );
      last = offset;
    }
  }
  return parts.join(' → ');
}

function drawCover(layout: Layout, input: ReportInput, text: ReportText, title: string): void {
  layout.title(title, 20);
  layout.paragraph(`${input.account.name} · ${input.site.name}`, { size: 12, bold: true });
  layout.space(6);
  layout.keyValues([
    [text.t('account'), input.account.name],
    [text.t('site'), input.site.name],
    [text.t('timezone'), input.site.timezone],
    [
      text.t('period'),
      `${text.dateTimeWithOffset(input.report.from)} – ${text.dateTimeWithOffset(input.report.to)}`,
    ],
    [text.t('utcOffsets'), offsetsInPeriod(input, text)],
    [text.t('template'), text.templateName(input.report.template)],
    [text.t('language'), text.languageName()],
    [text.t('generatedAt'), text.dateTimeWithOffset(input.report.createdAt)],
    [text.t('reportId'), input.report.id],
  ]);
}

function drawSummary(layout: Layout, input: ReportInput, text: ReportText, reports: ChannelReport[]): void {
  const columns: Column[] = [
    { header: text.t('channel'), width: 70, lines: 4 },
    { header: text.t('unit'), width: 32 },
    { header: text.t('rules'), width: 53, lines: 6 },
    { header: text.t('min'), width: 29, align: 'right' },
    { header: text.t('mean'), width: 37, align: 'right' },
    { header: text.t('max'), width: 29, align: 'right' },
    { header: text.t('readings'), width: 43, align: 'right' },
    { header: text.t('coverage'), width: 44, align: 'right' },
    { header: text.t('timeInRange'), width: 40, align: 'right' },
    { header: text.t('excursions'), width: 57, align: 'right' },
    { header: text.t('alarms'), width: 34, align: 'right' },
    { header: text.t('notAcknowledged'), width: 44, align: 'right' },
  ];
  const rows: Row[] = reports.map(({ channel, stats, decimals }) => {
    const name =
      channel.deviceDeletedAt === null
        ? channelName(text, channel)
        : `${channelName(text, channel)} (${text.t('deletedMark', { date: text.date(channel.deviceDeletedAt) })})`;
    const value = (v: number | null): string => (v === null ? '–' : text.number(v, decimals));
    return {
      cells: [
        name,
        channel.unit,
        rulesText(input, text, channel, decimals, true),
        value(stats.min),
        value(stats.mean),
        value(stats.max),
        text.number(stats.readings),
        text.percent(stats.coveragePct),
        // Without a rule nothing is judged: the rules column says so.
        stats.judgedReadings === 0 ? '–' : text.percent(stats.timeInRangePct),
        text.number(stats.excursions.length),
        text.number(stats.alarms),
        text.number(stats.alarmsNotAcknowledged),
      ],
    };
  });
  layout.table(columns, rows, {
    size: 7,
    title: text.t('summary'),
    continued: text.t('continued'),
    empty: text.t('none'),
  });
  layout.space(6);
  layout.heading(text.t('methodTitle'), 9, 40);
  layout.paragraph(text.t('method'), { size: 7.5, muted: true });
}

function chartBands(input: ReportInput, channel: ReportChannel): ChartBand[] {
  return segmentsInForce(channel.rules, input.report.from, input.report.to)
    .filter((s) => s.enabled)
    .map((s) => ({
      from: Math.max(s.from, input.report.from),
      to: Math.min(s.to, input.report.to),
      min: s.okMin,
      max: s.okMax,
    }));
}

function drawChannelPage(
  layout: Layout,
  input: ReportInput,
  text: ReportText,
  report: ChannelReport,
  daily: boolean,
): void {
  const { channel, stats, decimals } = report;
  if (daily) {
    layout.newPage();
  } else {
    layout.ensure(CHART_HEIGHT + 60);
  }
  layout.heading(channelName(text, channel), 11, CHART_HEIGHT + 30);
  const facts = [
    `${text.kindName(channel.kind)} (${channel.unit})`,
    `${text.t('rules')}: ${rulesText(input, text, channel, decimals).replace(/\n/g, '; ')}`,
  ];
  const grace = segmentsInForce(channel.rules, input.report.from, input.report.to).find((s) => s.enabled);
  if (grace) facts.push(`${text.t('grace')} ${text.number(grace.graceMin)} ${text.t('minutesShort')}`);
  if (channel.deviceDeletedAt !== null) {
    facts.push(text.t('deletedMark', { date: text.dateTime(channel.deviceDeletedAt) }));
  }
  for (const move of input.moves.filter((m) => m.deviceId === channel.deviceId)) {
    const date = text.dateTime(move.effectiveAt);
    if (move.toSiteId === input.site.id) facts.push(text.t('movedIn', { site: move.fromSiteName, date }));
    else facts.push(text.t('movedOut', { site: move.toSiteName, date }));
  }
  layout.paragraph(facts.join(' · '), { size: 8, muted: true });
  if (stats.readings === 0) layout.paragraph(text.t('noData'), { size: 8 });

  layout.ensure(CHART_HEIGHT);
  drawChart(
    layout.doc,
    { x: layout.left, y: layout.y, width: layout.width, height: CHART_HEIGHT },
    {
      from: input.report.from,
      to: input.report.to,
      trace: report.trace,
      dataMin: stats.min,
      dataMax: stats.max,
      bands: chartBands(input, channel),
      excursions: stats.excursions,
      unit: channel.unit,
      decimals,
    },
    text,
    FONTS,
  );
  layout.space(CHART_HEIGHT + 4);
  drawLegend(layout, text);
  // The trace is drawn; the chart needs it no more.
  report.trace = { x: new Float64Array(0), y: new Float64Array(0) };

  if (!daily) {
    layout.space(8);
    return;
  }
  const value = (v: number | null): string => (v === null ? '–' : text.number(v, decimals));
  const columns: Column[] = [
    { header: text.t('date'), width: 80 },
    { header: text.t('hours'), width: 40, align: 'right' },
    { header: withUnit(text.t('min'), channel.unit), width: 55, align: 'right' },
    { header: withUnit(text.t('mean'), channel.unit), width: 55, align: 'right' },
    { header: withUnit(text.t('max'), channel.unit), width: 55, align: 'right' },
    { header: text.t('readings'), width: 55, align: 'right' },
    { header: text.t('minutesOut'), width: 70, align: 'right' },
  ];
  const rows: Row[] = stats.days.map((d) => ({
    cells: [
      text.date(d.from),
      text.number(d.hours),
      value(d.min),
      value(d.mean),
      value(d.max),
      text.number(d.readings),
      text.number(d.minutesOutOfRange),
    ],
  }));
  layout.space(4);
  layout.table(columns, rows, {
    size: 7,
    title: `${text.t('daily')} – ${channelName(text, channel)}`,
    continued: text.t('continued'),
    empty: text.t('none'),
  });
  drawExcursions(layout, input, text, report);
}

/**
 * The line under an alarm's row: the alert rule that raised it with the severity of the condition
 * (an event of the sensor's own rule has none), and the acknowledgement note.
 */
function alarmNote(a: ReportAlarm, text: ReportText): { note?: string } {
  const parts = [
    ...(a.rule ? [`${text.t('alertRule')}: ${a.rule.name} (${text.t(a.rule.severity)})`] : []),
    ...(a.ackNote ? [`${text.t('note')}: ${a.ackNote}`] : []),
  ];
  return parts.length > 0 ? { note: parts.join(' · ') } : {};
}

/**
 * Every excursion of the channel, with the alarm it raised (an alarm event of the channel that started
 * within it) and whether that alarm was acknowledged. A short excursion within the rule's grace time
 * raises none.
 */
function drawExcursions(layout: Layout, input: ReportInput, text: ReportText, report: ChannelReport): void {
  const { channel, stats, decimals } = report;
  const alarms = input.alarms.filter(
    (a) => a.channelId === channel.channelId && (a.kind === 'threshold_high' || a.kind === 'threshold_low'),
  );
  const columns: Column[] = [
    { header: text.t('started'), width: 80, lines: 2 },
    { header: text.t('ended'), width: 80, lines: 2 },
    { header: text.t('duration'), width: 60, align: 'right' },
    { header: text.t('readings'), width: 50, align: 'right' },
    { header: withUnit(text.t('peak'), channel.unit), width: 55, align: 'right' },
    { header: text.t('alarmAt'), width: 140, lines: 2 },
  ];
  // A flapping sensor can make thousands of excursions: the longest are listed, the rest summed up.
  const listed =
    stats.excursions.length <= MAX_EXCURSION_ROWS
      ? stats.excursions
      : [...stats.excursions]
          .sort((a, b) => b.to - b.from - (a.to - a.from) || a.from - b.from)
          .slice(0, MAX_EXCURSION_ROWS)
          .sort((a, b) => a.from - b.from);
  const rows: Row[] = listed.map((e) => {
    const alarm = alarms.find((a) => a.startedAt >= e.from && a.startedAt < e.to);
    const state =
      alarm === undefined
        ? '–'
        : alarm.acknowledgedAt === null
          ? `${text.kindName(alarm.kind)}, ${text.t('notAckedWord')}`
          : `${text.kindName(alarm.kind)}, ${text.t('ackedWord')}\n${alarm.acknowledgedBy ?? ''}`;
    return {
      cells: [
        text.dateTime(e.from),
        text.dateTime(e.to),
        text.duration(e.to - e.from),
        text.number(e.readings),
        text.number(e.peak, decimals),
        state,
      ],
    };
  });
  layout.table(columns, rows, {
    size: 7,
    title: `${text.t('excursions')} – ${channelName(text, channel)}`,
    continued: text.t('continued'),
    empty: text.t('none'),
  });
  if (listed.length < stats.excursions.length) {
    const listedSet = new Set(listed);
    const rest = stats.excursions.filter((e) => !listedSet.has(e));
    const minutes = rest.reduce((sum, e) => sum + (e.to - e.from), 0) / 60_000_000;
    layout.paragraph(
      text.t('moreExcursions', { n: text.number(rest.length), minutes: text.number(Math.round(minutes)) }),
      { size: 7.5, muted: true },
    );
  }
}

function drawLegend(layout: Layout, text: ReportText): void {
  const doc = layout.doc;
  const y = layout.y;
  let x = layout.left + 42;
  doc.font(FONTS.regular).fontSize(7).fillColor('#333333');
  const item = (draw: () => void, label: string): void => {
    draw();
    doc.fillColor('#333333').text(label, x + 14, y, { lineBreak: false });
    x += 14 + doc.widthOfString(label) + 14;
  };
  item(() => doc.rect(x, y + 1, 10, 6).fill('#d8f0d8'), text.t('operatingRange'));
  item(() => doc.rect(x, y + 1, 10, 6).fill('#f3c4c4'), text.t('excursion'));
  layout.space(12);
}

function snapshotText(text: ReportText, snapshot: Partial<RuleSnapshot>, unit: string): string {
  const parts: string[] = [];
  if (snapshot.okMin !== undefined && snapshot.okMax !== undefined) {
    parts.push(withUnit(`${text.number(snapshot.okMin, 1)} – ${text.number(snapshot.okMax, 1)}`, unit));
  } else {
    if (snapshot.okMin !== undefined)
      parts.push(`${text.t('min')} ${withUnit(text.number(snapshot.okMin, 1), unit)}`);
    if (snapshot.okMax !== undefined)
      parts.push(`${text.t('max')} ${withUnit(text.number(snapshot.okMax, 1), unit)}`);
  }
  if (snapshot.graceMin !== undefined) {
    parts.push(`${text.t('grace')} ${text.number(snapshot.graceMin)} ${text.t('minutesShort')}`);
  }
  if (snapshot.enabled !== undefined) parts.push(snapshot.enabled ? text.t('enabled') : text.t('disabled'));
  return parts.length > 0 ? parts.join(', ') : '–';
}

function drawSections(layout: Layout, input: ReportInput, text: ReportText): void {
  const byId = new Map(input.channels.map((c) => [c.channelId, c]));
  const name = (channelId: string): string => {
    const c = byId.get(channelId);
    return c ? channelName(text, c) : channelId;
  };
  const unit = (channelId: string): string => byId.get(channelId)?.unit ?? '';
  const opts = (title: string) => ({ size: 7, title, continued: text.t('continued'), empty: text.t('none') });
  layout.newPage();

  layout.table(
    [
      { header: text.t('channel'), width: 74, lines: 2 },
      { header: text.t('kind'), width: 44, lines: 3 },
      { header: text.t('started'), width: 54, lines: 2 },
      { header: text.t('alarmAt'), width: 54, lines: 2 },
      { header: text.t('ended'), width: 54, lines: 2 },
      { header: text.t('peak'), width: 50, align: 'right' },
      { header: text.t('duration'), width: 46, align: 'right', lines: 2 },
      { header: text.t('silenced'), width: 40 },
      { header: text.t('acknowledged'), width: 92, lines: 3 },
    ],
    input.alarms.map((a) => {
      const c = byId.get(a.channelId);
      const decimals = c?.kind === 'temperature' ? 1 : 2;
      return {
        cells: [
          name(a.channelId),
          text.kindName(a.kind),
          text.dateTime(a.startedAt),
          a.alarmAt === null ? '–' : text.dateTime(a.alarmAt),
          a.endedAt === null ? text.t('ongoing') : text.dateTime(a.endedAt),
          a.peakValue === null ? '–' : withUnit(text.number(a.peakValue, decimals), unit(a.channelId)),
          a.endedAt === null ? text.t('ongoing') : text.duration(a.endedAt - a.startedAt),
          a.silenced ? text.t('yes') : text.t('no'),
          a.acknowledgedAt === null
            ? text.t('no')
            : `${a.acknowledgedBy ?? '–'}\n${text.dateTime(a.acknowledgedAt)}`,
        ],
        ...alarmNote(a, text),
      };
    }),
    opts(text.t('alarms')),
  );

  layout.table(
    [
      { header: text.t('channel'), width: 90, lines: 2 },
      { header: text.t('started'), width: 60, lines: 2 },
      { header: text.t('ended'), width: 60, lines: 2 },
      { header: text.t('reason'), width: 140, lines: 4 },
      { header: text.t('setBy'), width: 100, lines: 3 },
    ],
    input.silences.map((s) => ({
      cells: [
        name(s.channelId),
        text.dateTime(s.from),
        text.dateTime(s.to),
        s.reason ?? '–',
        `${s.createdBy}\n${text.dateTime(s.createdAt)}`,
      ],
    })),
    opts(text.t('silences')),
  );

  layout.table(
    [
      { header: text.t('when'), width: 60, lines: 2 },
      { header: text.t('channel'), width: 90, lines: 2 },
      { header: text.t('before'), width: 100, lines: 3 },
      { header: text.t('after'), width: 100, lines: 3 },
      { header: text.t('by'), width: 90, lines: 2 },
    ],
    input.thresholdChanges.map((c) => ({
      cells: [
        text.dateTime(c.ts),
        name(c.channelId),
        snapshotText(text, c.before, unit(c.channelId)),
        snapshotText(text, c.after, unit(c.channelId)),
        c.by,
      ],
    })),
    opts(text.t('thresholdChanges')),
  );

  layout.table(
    [
      { header: text.t('when'), width: 60, lines: 2 },
      { header: text.t('channel'), width: 100, lines: 2 },
      { header: text.t('by'), width: 100, lines: 2 },
      { header: text.t('replayed'), width: 60, align: 'right', lines: 2 },
      { header: text.t('eventsCreated'), width: 60, align: 'right', lines: 2 },
    ],
    input.recomputes.map((r) => ({
      cells: [
        text.dateTime(r.ts),
        name(r.channelId),
        r.by,
        text.number(r.replayed),
        text.number(r.eventsCreated),
      ],
    })),
    opts(text.t('recomputes')),
  );

  layout.table(
    [
      { header: text.t('effectiveAt'), width: 60, lines: 2 },
      { header: text.t('device'), width: 80, lines: 2 },
      { header: text.t('fromSite'), width: 80, lines: 2 },
      { header: text.t('toSite'), width: 80, lines: 2 },
      { header: text.t('by'), width: 100, lines: 3 },
    ],
    input.moves.map((m) => ({
      cells: [
        text.dateTime(m.effectiveAt),
        m.deviceName,
        m.fromSiteName,
        m.toSiteName,
        `${m.by}\n${text.dateTime(m.ts)}`,
      ],
    })),
    opts(text.t('moves')),
  );

  const deleted = new Map<string, ReportChannel[]>();
  for (const c of input.channels) {
    if (
      c.deviceDeletedAt === null ||
      c.deviceDeletedAt < input.report.from ||
      c.deviceDeletedAt >= input.report.to
    ) {
      continue;
    }
    deleted.set(c.deviceId, [...(deleted.get(c.deviceId) ?? []), c]);
  }
  layout.table(
    [
      { header: text.t('device'), width: 90, lines: 2 },
      { header: text.t('model'), width: 70, lines: 2 },
      { header: text.t('deletedAt'), width: 70, lines: 2 },
      { header: text.t('channels'), width: 180, lines: 3 },
    ],
    [...deleted.values()].map((channels) => {
      const first = channels[0]!;
      return {
        cells: [
          first.deviceName,
          first.deviceModel,
          text.dateTime(first.deviceDeletedAt!),
          channels.map((c) => `${c.label ?? text.kindName(c.kind)} (${c.unit})`).join(', '),
        ],
      };
    }),
    opts(text.t('deletedDevices')),
  );

  drawAudit(layout, input, text);
}

function drawAudit(layout: Layout, input: ReportInput, text: ReportText): void {
  const head = input.auditChainHead;
  layout.heading(text.t('auditTrail'), 11, 70);
  layout.keyValues(
    [
      [text.t('chainHead'), head.entryId ?? text.t('none')],
      [text.t('chainHash'), head.hash ?? text.t('none')],
      [text.t('chainEntries'), text.number(head.entries)],
    ],
    150,
    8,
  );
  layout.paragraph(text.t('auditExplain'), { size: 7.5, muted: true });
  layout.space(6);
}

function drawSignature(layout: Layout, text: ReportText): void {
  layout.heading(text.t('signature'), 11, 3 * 34 + 10);
  layout.signatureLine(text.t('reviewedBy'), 260);
  layout.signatureLine(text.t('signDate'), 160);
  layout.signatureLine(text.t('signatureLine'), 260);
}

/** The running header and the "page x of y" footer of every page, drawn once the page count is known. */
function drawPageFurniture(
  doc: PDFKit.PDFDocument,
  input: ReportInput,
  text: ReportText,
  title: string,
): void {
  const range = doc.bufferedPageRange();
  const width = PAGE.width - 2 * PAGE.margin;
  for (let i = range.start; i < range.start + range.count; i++) {
    doc.switchToPage(i);
    const page = text.t('page', { x: i + 1, y: range.count });
    doc.font(FONTS.regular).fontSize(7).fillColor('#555555');
    if (i > range.start) {
      doc.text(`${title} · ${input.site.name}`, PAGE.margin, 24, { width: width * 0.6, lineBreak: false });
      doc.text(`${text.date(input.report.from)} – ${text.date(input.report.to - 1)}`, PAGE.margin, 24, {
        width,
        align: 'right',
      });
      doc
        .lineWidth(0.3)
        .strokeColor('#bbbbbb')
        .moveTo(PAGE.margin, 36)
        .lineTo(PAGE.width - PAGE.margin, 36)
        .stroke();
    }
    const footerY = PAGE.height - 38;
    doc
      .lineWidth(0.3)
      .strokeColor('#bbbbbb')
      .moveTo(PAGE.margin, footerY - 5)
      .lineTo(PAGE.width - PAGE.margin, footerY - 5)
      .stroke();
    doc.fillColor('#555555').text(`${text.t('reportId')}: ${input.report.id}`, PAGE.margin, footerY, {
      width: width * 0.6,
      lineBreak: false,
    });
    doc.text(page, PAGE.margin, footerY, { width, align: 'right' });
  }
}
