import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DateTime } from 'luxon';
import type {
  ReportAlarm,
  ReportChannel,
  ReportInput,
  ReportLanguage,
  ReportSeries,
  ReportTemplate,
} from '../../../cloud/src/reports/report-input.ts';
import { MAX_EXCURSION_ROWS, renderReport } from '../../../cloud/src/reports/report-pdf.ts';

/**
 * The PDF read back with Debian's poppler-utils (pdftotext, pdfinfo, pdffonts): a data set built here
 * for a New York site over March 2025, whose daylight-saving change falls on the 9th.
 */
const NY = 'America/New_York';
const MINUTE = 60_000_000;
const local = (iso: string): number => DateTime.fromISO(iso, { zone: NY }).toMillis() * 1000;
const FROM = local('2025-03-01T00:00');
const TO = local('2025-04-01T00:00');
const CREATED = local('2025-04-01T03:17');
const STEP = 10 * MINUTE;
const HOT_AT = local('2025-03-09T23:30'); // 03:30 UTC on the 10th
const COLD_AT = local('2025-03-15T12:00');
const RULE_CHANGE = local('2025-03-20T10:00');
const DELETED_AT = local('2025-03-12T08:00');
const HASH = 'a3f1c9e07b5d42861f0e9c3ab7d5e2f4c6a8b0d1e3f5a7c9b2d4f6e8a0c1e3f5';

function shelfSeries(): ReportSeries {
  const n = (TO - FROM) / STEP;
  const ts = new Float64Array(n);
  const values = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    ts[i] = FROM + i * STEP;
    values[i] = [3, 4, 5][i % 3]!;
    if (ts[i] === HOT_AT) values[i] = 9.7;
    if (ts[i] === COLD_AT) values[i] = 1.2;
  }
  return { ts, values };
}

function constantSeries(value: number, until = TO): ReportSeries {
  const n = Math.floor((until - FROM) / STEP);
  const ts = Float64Array.from({ length: n }, (_, i) => FROM + i * STEP);
  return { ts, values: new Float64Array(n).fill(value) };
}

const rule = { from: FROM - MINUTE, enabled: true, okMin: 2, okMax: 8, graceMin: 15 };
const CHANNELS: ReportChannel[] = [
  {
    channelId: 'chn_shelf',
    sensorId: 'sen_shelf',
    deviceId: 'dev_cooler',
    deviceName: 'Cooler',
    deviceModel: 'Shelly Plus H&T',
    deviceDeletedAt: null,
    kind: 'temperature',
    label: 'Shelf A',
    unit: '°C',
    rules: [rule, { ...rule, from: RULE_CHANGE, okMax: 6 }],
  },
  {
    channelId: 'chn_humidity',
    sensorId: 'sen_humidity',
    deviceId: 'dev_cooler',
    deviceName: 'Cooler',
    deviceModel: 'Shelly Plus H&T',
    deviceDeletedAt: null,
    kind: 'humidity',
    label: 'Air moisture',
    unit: '%',
    rules: [{ ...rule, enabled: false }],
  },
  {
    channelId: 'chn_freezer',
    sensorId: 'sen_freezer',
    deviceId: 'dev_freezer',
    deviceName: 'Old freezer',
    deviceModel: 'LHT65',
    deviceDeletedAt: DELETED_AT,
    kind: 'temperature',
    label: 'Probe',
    unit: '°C',
    rules: [{ ...rule, okMin: -25, okMax: -18 }],
  },
];

function alarm(overrides: Partial<ReportAlarm> = {}): ReportAlarm {
  return {
    eventId: 'evt_hot',
    channelId: 'chn_shelf',
    kind: 'threshold_high',
    startedAt: HOT_AT,
    alarmAt: HOT_AT + STEP,
    endedAt: HOT_AT + 2 * STEP,
    okMin: 2,
    okMax: 8,
    peakValue: 9.7,
    silenced: false,
    acknowledgedAt: HOT_AT + 3 * STEP,
    acknowledgedBy: 'ann@example.com',
    ackNote: 'Door seal replaced, goods moved to the backup cooler',
    rule: null,
    ...overrides,
  };
}

function buildInput(
  options: {
    language?: ReportLanguage;
    template?: ReportTemplate;
    createdAt?: number;
    alarms?: ReportAlarm[];
  } = {},
): ReportInput {
  return {
    report: {
      id: 'rpt_test0001',
      template: options.template ?? 'haccp_monthly',
      language: options.language ?? 'en',
      createdAt: options.createdAt ?? CREATED,
      from: FROM,
      to: TO,
    },
    account: { id: 'acc_1', name: 'Deli Corner LLC' },
    site: { id: 'sit_1', name: 'Brooklyn store', timezone: NY, vertical: 'food' },
    auditChainHead: { entryId: 'aud_head42', hash: HASH, entries: 42 },
    channels: CHANNELS,
    alarms: options.alarms ?? [alarm()],
    silences: [
      {
        silenceId: 'sil_1',
        channelId: 'chn_shelf',
        from: local('2025-03-05T22:00'),
        to: local('2025-03-06T02:00'),
        reason: 'Defrost cycle',
        createdBy: 'bob@example.com',
        createdAt: local('2025-03-05T21:55'),
      },
    ],
    thresholdChanges: [
      {
        ts: RULE_CHANGE,
        by: 'ann@example.com',
        channelId: 'chn_shelf',
        before: { okMin: 2, okMax: 8 },
        after: { okMin: 2, okMax: 6 },
      },
    ],
    recomputes: [
      {
        ts: RULE_CHANGE + MINUTE,
        by: 'ann@example.com',
        channelId: 'chn_shelf',
        replayed: 2880,
        eventsCreated: 0,
      },
    ],
    moves: [],
    series: async (channelId) => {
      if (channelId === 'chn_shelf') return shelfSeries();
      if (channelId === 'chn_freezer') return constantSeries(-20, DELETED_AT);
      return constantSeries(55);
    },
  };
}

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'report-pdf-'));
});
afterAll(() => {
  if (!process.env.KEEP_REPORTS) fs.rmSync(dir, { recursive: true, force: true });
});

const POPPLER_ENV = { ...process.env, TZ: 'UTC' };

async function render(input: ReportInput, name: string): Promise<{ pdf: Buffer; file: string }> {
  const pdf = await renderReport(input);
  const file = path.join(dir, name);
  fs.writeFileSync(file, pdf);
  return { pdf, file };
}

function pdftotext(file: string, page?: number): string {
  const range = page === undefined ? [] : ['-f', String(page), '-l', String(page)];
  return execFileSync('pdftotext', ['-layout', ...range, file, '-'], { env: POPPLER_ENV, encoding: 'utf8' });
}

function pdfinfo(file: string): Record<string, string> {
  const out = execFileSync('pdfinfo', ['-isodates', file], { env: POPPLER_ENV, encoding: 'utf8' });
  return Object.fromEntries(
    out
      .split('\n')
      .filter((l) => l.includes(':'))
      .map((l) => [l.slice(0, l.indexOf(':')).trim(), l.slice(l.indexOf(':') + 1).trim()]),
  );
}

/** The lines of the text that contain `needle`. */
function linesWith(text: string, needle: string): string[] {
  return text.split('\n').filter((l) => l.includes(needle));
}

const sha256 = (b: Buffer): string => crypto.createHash('sha256').update(b).digest('hex');

describe('the haccp_monthly report in English', () => {
  let file: string;
  let text: string;
  let info: Record<string, string>;
  const shelf = shelfSeries().values;
  const mean = shelf.reduce((s, v) => s + v, 0) / shelf.length;

  beforeAll(async () => {
    ({ file } = await render(buildInput(), 'en.pdf'));
    text = pdftotext(file);
    info = pdfinfo(file);
  });

  it('prints the min, mean and max of the data set and its reading count in the summary', () => {
    const [row] = linesWith(text, 'Cooler / Shelf A');
    expect(row).toBeDefined();
    const expected = ['1.2', mean.toFixed(1), '9.7', shelf.length.toLocaleString('en-GB')].join('\\s+');
    expect(row).toMatch(new RegExp(`°C\\s+2\\.0 – 8\\.0\\s+${expected}\\s`));
    // The freezer's readings end at its device's deletion.
    // The name wraps within its column: the row's first line starts with its first words.
    const [freezer] = linesWith(text, 'Old freezer /');
    expect(text).toMatch(/Old freezer \/.*\n\s*Probe \(deleted\s*\n\s*12 Mar 2025\)/);
    const freezerReadings = Math.floor((DELETED_AT - FROM) / STEP);
    expect(freezer).toMatch(
      new RegExp(`-20\\.0\\s+-20\\.0\\s+-20\\.0\\s+${freezerReadings.toLocaleString('en-GB')}\\s+100\\.0 %`),
    );
  });

  it('reports only temperature channels', () => {
    expect(text).not.toContain('Air moisture');
  });

  it('prints the period in site time with both UTC offsets of the March change', () => {
    expect(text).toContain('1 Mar 2025, 00:00 UTC−05:00 – 1 Apr 2025, 00:00 UTC−04:00');
    expect(text).toMatch(/UTC−05:00 → UTC−04:00 \(daylight-saving change 9 Mar 2025\)/);
    expect(text).toContain('1 Apr 2025, 03:17 UTC−04:00');
  });

  it('puts each reading on its local day: 9 March has 23 hours and the 23:30 reading', () => {
    const daily = linesWith(text, 'Mar 2025').filter((l) => /^\s*\d+ Mar 2025\s+\d+\s/.test(l));
    // One row per local day for each of the two channels.
    expect(daily).toHaveLength(2 * 31);
    const ninth = daily.find((l) => l.trim().startsWith('9 Mar 2025'))!;
    expect(ninth).toMatch(/^\s*9 Mar 2025\s+23\s+3\.0\s+\S+\s+9\.7\s+138\s+10\s*$/);
    const tenth = daily.find((l) => l.trim().startsWith('10 Mar 2025'))!;
    expect(tenth).toMatch(/^\s*10 Mar 2025\s+24\s+3\.0\s+4\.0\s+5\.0\s+144\s+0\s*$/);
  });

  it('lists the alarm with its times, peak, acknowledgement and note', () => {
    // Kind, times and acknowledgement wrap onto a second line within their columns.
    expect(text).toMatch(
      /Cooler \/ Shelf A\s+above\s+9 Mar 2025,\s+9 Mar 2025,\s+9 Mar 2025,\s+9\.7 °C\s+20 min\s+no\s+ann@example\.com\n\s*range\s+23:30\s+23:40\s+23:50\s+10 Mar 2025, 00:00\n/,
    );
    expect(text).toContain('Note: Door seal replaced, goods moved to the backup cooler');
  });

  it('lists every excursion with the alarm it raised', () => {
    const table = text.slice(text.indexOf('Excursions – Cooler / Shelf A'));
    expect(table).toMatch(
      /9 Mar 2025, 23:30\s+9 Mar 2025, 23:40\s+10 min\s+1\s+9\.7\s+above range, acknowledged\n\s+ann@example\.com/,
    );
    expect(table).toMatch(/15 Mar 2025, 12:00\s+15 Mar 2025, 12:10\s+10 min\s+1\s+1\.2\s+–\n/);
    expect(text.slice(text.indexOf('Excursions – Old freezer / Probe'))).toMatch(/Alarm\s*\n\s*none\n/);
  });

  it('lists the silence window with its reason and who set it, and the threshold change before and after', () => {
    expect(linesWith(text, 'Defrost cycle')[0]).toMatch(
      /Cooler \/ Shelf A\s+5 Mar 2025,\s+6 Mar 2025,\s+Defrost cycle\s+bob@example\.com/,
    );
    expect(linesWith(text, '2.0 – 6.0 °C')[0]).toMatch(
      /20 Mar 2025,\s+Cooler \/ Shelf A\s+2\.0 – 8\.0 °C\s+2\.0 – 6\.0 °C\s+ann@example\.com/,
    );
    expect(linesWith(text, '2,880')[0]).toMatch(/Cooler \/ Shelf A\s+ann@example\.com\s+2,880\s+0/);
  });

  it('lists the device deleted during the period and the audit chain head', () => {
    expect(linesWith(text, 'LHT65')[0]).toMatch(/Old freezer\s+LHT65\s+12 Mar 2025, 08:00\s+Probe \(°C\)/);
    expect(text).toContain(HASH);
    expect(text).toContain('aud_head42');
    expect(text).toMatch(/Entries in the chain\s+42/);
  });

  it('says "none" for an empty section', () => {
    const moves = text.slice(text.indexOf('Device moves'));
    expect(moves.split('\n').slice(1, 4).join('\n')).toMatch(/^\s*none\s*$/m);
  });

  it('has the metadata and "page x of y" on every page, and the signature block on the last page', () => {
    const pages = Number(info.Pages);
    expect(pages).toBeGreaterThanOrEqual(4);
    expect(info.Title).toBe('HACCP temperature log – Brooklyn store – 1 Mar 2025 – 31 Mar 2025');
    expect(info.Author).toBe('Deli Corner LLC');
    expect(info.CreationDate).toBe('2025-04-01T07:17:00Z');
    expect(info.ModDate).toBe('2025-04-01T07:17:00Z');
    for (let p = 1; p <= pages; p++) {
      expect(pdftotext(file, p)).toContain(`Page ${p} of ${pages}`);
    }
    const last = pdftotext(file, pages);
    expect(last).toContain('Review and signature');
    expect(last).toContain('Reviewed by');
    expect(last).toContain('Signature');
  });

  it('embeds the DejaVu fonts', () => {
    const fonts = execFileSync('pdffonts', [file], { encoding: 'utf8' });
    const embedded = fonts.split('\n').filter((l) => l.includes('DejaVuSans'));
    expect(embedded.length).toBeGreaterThanOrEqual(2);
    for (const line of embedded) expect(line).toMatch(/\byes\s+yes\s+(yes|no)\s+\d+\s+0\s*$/);
  });
});

describe('the report in German and French', () => {
  it('has German headings, pages, dates and decimal commas', async () => {
    const { file } = await render(buildInput({ language: 'de' }), 'de.pdf');
    const text = pdftotext(file);
    const pages = Number(pdfinfo(file).Pages);
    for (const heading of [
      'HACCP-Temperaturprotokoll',
      'Übersicht',
      'Tageswerte',
      'Alarme',
      'Stummschaltungen',
      'Grenzwertänderungen',
      'Prüfung und Unterschrift',
    ]) {
      expect(text).toContain(heading);
    }
    expect(text).toContain(`Seite 1 von ${pages}`);
    expect(text).toContain(`Seite ${pages} von ${pages}`);
    expect(text).toContain('Zeitumstellung 09.03.2025');
    expect(linesWith(text, 'Cooler / Shelf A')[0]).toMatch(
      /2,0 – 8,0\s+1,2\s+4,0\s+9,7\s+4\.458\s+100,0 %\s+99,9 %\s+2\s+1\s+0$/,
    );
    expect(text).toContain('Notiz: Door seal replaced');
    expect(text).not.toContain('Page 1 of');
  });

  it('has French headings, pages and decimal commas', async () => {
    const { file } = await render(buildInput({ language: 'fr' }), 'fr.pdf');
    const text = pdftotext(file);
    const pages = Number(pdfinfo(file).Pages);
    for (const heading of [
      'Relevé de températures HACCP',
      'Synthèse',
      'Valeurs journalières',
      'Modifications des seuils',
      'Vérification et signature',
    ]) {
      expect(text).toContain(heading);
    }
    expect(text).toContain(`Page 1 sur ${pages}`);
    expect(text).toContain("changement d'heure 9 mars 2025");
    expect(linesWith(text, 'Cooler / Shelf A')[0]).toMatch(/1,2\s+\d,\d\s+9,7\s/);
  });
});

describe('the bytes', () => {
  it('are the same for the same input, and change with the creation date', async () => {
    const a = await renderReport(buildInput());
    const b = await renderReport(buildInput());
    expect(sha256(a)).toBe(sha256(b));
    expect(a.subarray(0, 5).toString()).toBe('%PDF-');
    const c = await renderReport(buildInput({ createdAt: CREATED + 60_000_000 }));
    expect(sha256(c)).not.toBe(sha256(a));
  });
});

describe('a table that runs over a page break', () => {
  it('continues on the next page with its title and header repeated', async () => {
    const alarms = Array.from({ length: 90 }, (_, i) =>
      alarm({
        eventId: `evt_${i}`,
        startedAt: FROM + i * 60 * MINUTE,
        ackNote: `Checked fridge, round ${i + 1}`,
      }),
    );
    const { file } = await render(buildInput({ alarms }), 'long.pdf');
    const pages = Number(pdfinfo(file).Pages);
    const continued = Array.from({ length: pages }, (_, i) => pdftotext(file, i + 1)).filter((t) =>
      t.includes('Alarms (continued)'),
    );
    expect(continued.length).toBeGreaterThanOrEqual(1);
    for (const page of continued)
      expect(page).toMatch(/Device \/ sensor\s+Kind\s+Started\s+Alarm\s+Ended\s+Peak/);
    const all = pdftotext(file);
    for (const i of [1, 45, 90]) expect(all).toContain(`Checked fridge, round ${i}\n`);
  });
});

describe('the channel_summary report', () => {
  it('has every kind of channel in the summary and a chart per channel, no daily tables', async () => {
    const { file } = await render(buildInput({ template: 'channel_summary' }), 'summary.pdf');
    const text = pdftotext(file);
    expect(text).toContain('Channel summary');
    expect(linesWith(text, 'Cooler / Air')[0]).toMatch(
      /%\s+no rule\s+55\.0\s+55\.0\s+55\.0\s+4,458\s+100\.0 %\s+–\s+0\s+0\s+0$/,
    );
    expect(text).toContain('Cooler / Shelf A');
    expect(text).not.toContain('Daily values');
    // One chart per channel: its heading, its facts line, and the chart's legend.
    expect(text).toMatch(/^\s*Cooler \/ Air moisture\s*\n\s*humidity \(%\) · Rule\(s\): no rule\s*$/m);
    expect(text).toMatch(
      /^\s*Cooler \/ Shelf A\s*\n\s*temperature \(°C\) · Rule\(s\): 2\.0 – 8\.0; from 20 Mar 2025, 10:00: 2\.0 – 6\.0/m,
    );
    expect(text).toMatch(/^\s*Old freezer \/ Probe\s*\n\s*temperature \(°C\) · Rule\(s\): -25\.0 – -18\.0/m);
    expect(linesWith(text, 'operating range')).toHaveLength(3);
  });
});

describe('edge cases', () => {
  it('cuts a long label with an ellipsis and reports a channel without readings', async () => {
    const longLabel = 'Walk-in cold room behind the bakery, lower shelf next to the door '.repeat(4).trim();
    const input = buildInput();
    input.channels = [
      ...CHANNELS,
      {
        ...CHANNELS[0]!,
        channelId: 'chn_long',
        sensorId: 'sen_long',
        deviceName: 'Cooler',
        label: longLabel,
      },
    ];
    const others = buildInput();
    input.series = async (channelId) =>
      channelId === 'chn_long'
        ? { ts: new Float64Array(0), values: new Float64Array(0) }
        : others.series(channelId);
    const { file } = await render(input, 'edge.pdf');
    const text = pdftotext(file);
    expect(text).not.toContain(longLabel);
    const summary = text.slice(text.indexOf('Summary'), text.indexOf('How the figures are computed'));
    const rows = summary.split('\n');
    const first = rows.findIndex((l) => l.startsWith('Cooler / Walk-in'));
    expect(rows[first]).toMatch(/°C\s+2\.0 – 8\.0\s+–\s+–\s+–\s+0\s+0\.0 %\s+–\s+0\s+0\s+0$/);
    // The name wraps to at most four lines within its column, the last one cut.
    const nameLines = rows.slice(first, first + 6).map((l) => l.slice(0, 18).trim());
    expect(nameLines.filter((l) => l.endsWith('…'))).toHaveLength(1);
    expect(text).toContain('no readings in the period');
  });

  it('draws a one-day report with hour ticks', async () => {
    const input = buildInput({ template: 'channel_summary' });
    input.report.to = local('2025-03-02T00:00');
    const { file } = await render(input, 'day.pdf');
    const text = pdftotext(file);
    expect(text).toContain('1 Mar 2025, 00:00 UTC−05:00 – 2 Mar 2025, 00:00 UTC−05:00');
    expect(text).toMatch(/^UTC offset\s+UTC−05:00\s*$/m);
    expect(text).toMatch(/03:00\s+06:00\s+09:00\s+12:00/);
  });

  it('lists a device moved out during the period and measures its coverage until the move', async () => {
    const movedAt = local('2025-03-16T00:00');
    const input = buildInput();
    input.moves = [
      {
        ts: movedAt + MINUTE,
        by: 'ann@example.com',
        deviceId: 'dev_cooler',
        deviceName: 'Cooler',
        fromSiteId: 'sit_1',
        toSiteId: 'sit_2',
        fromSiteName: 'Brooklyn store',
        toSiteName: 'Queens store',
        effectiveAt: movedAt,
      },
    ];
    const all = shelfSeries();
    const kept = all.ts.findIndex((t) => t >= movedAt);
    input.series = async () => ({ ts: all.ts.subarray(0, kept), values: all.values.subarray(0, kept) });
    const { file } = await render(input, 'moved.pdf');
    const text = pdftotext(file);
    expect(linesWith(text, 'Queens store').find((l) => l.includes('Brooklyn store'))).toMatch(
      /16 Mar 2025, 00:00\s+Cooler\s+Brooklyn store\s+Queens store\s+ann@example\.com/,
    );
    expect(text).toMatch(/moved to Queens store on 16 Mar\s+2025, 00:00/);
    expect(linesWith(text, 'Cooler / Shelf A')[0]).toMatch(
      new RegExp(`\\s${kept.toLocaleString('en-GB')}\\s+100\\.0 %\\s`),
    );
  });

  it('lists the longest excursions of a flapping sensor and counts the rest', async () => {
    const input = buildInput();
    // Every other reading is out of range: one-reading excursions of 10 minutes, and one of 5 readings.
    const all = shelfSeries();
    const values = all.values.map((_, i) => (i % 2 === 0 ? 9 : 5));
    values[1001] = 9;
    values[1003] = 9;
    input.series = async (channelId) =>
      channelId === 'chn_shelf' ? { ts: all.ts, values } : buildInput().series(channelId);
    const { file } = await render(input, 'flapping.pdf');
    const text = pdftotext(file);
    const total = Math.ceil(all.ts.length / 2) - 2;
    expect(linesWith(text, 'Cooler / Shelf A')[0]).toMatch(
      new RegExp(`\\s${total.toLocaleString('en-GB')}\\s+1\\s+0$`),
    );
    const rest = total - MAX_EXCURSION_ROWS;
    expect(text).toContain(
      `${rest.toLocaleString('en-GB')} shorter excursions not listed (${(rest * 10).toLocaleString('en-GB')} min out of range in total).`,
    );
    // The longest one is listed.
    expect(text).toMatch(/\s50 min\s+5\s+9\.0\s/);
  });
});
