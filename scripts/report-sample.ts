/**
 * Writes a realistic sample report: a month of synthetic 5-minute data for a small restaurant kitchen
 * (two fridges, a freezer, the room's humidity), with an excursion after a door was left open, its
 * acknowledged alarm, a silence window for a defrost, a threshold change and a deleted device.
 *
 *   node --import tsx scripts/report-sample.ts out.pdf [--template haccp_monthly] [--language de]
 *     [--timezone Europe/Berlin] [--channels 50 --interval 1]  (a large report for timing)
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { DateTime } from 'luxon';
import type {
  ReportChannel,
  ReportInput,
  ReportLanguage,
  ReportSeries,
  ReportTemplate,
} from '../cloud/src/reports/report-input.ts';
import { renderReport } from '../cloud/src/reports/report-pdf.ts';

const US_PER_MS = 1000;
const US_PER_MINUTE = 60_000_000;

/** A small deterministic pseudo-random generator (mulberry32), so the sample is the same every time. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface SampleOptions {
  template?: ReportTemplate;
  language?: ReportLanguage;
  timezone?: string;
  /** Extra fridge channels beyond the sample's four, for timing a large report. */
  channels?: number;
  intervalMinutes?: number;
  /** The month, `yyyy-MM`. */
  month?: string;
}

export function sampleReportInput(options: SampleOptions = {}): ReportInput {
  const zone = options.timezone ?? 'Europe/Berlin';
  const month = DateTime.fromISO(`${options.month ?? '2025-03'}-01`, { zone });
  const from = month.toMillis() * US_PER_MS;
  const to = month.plus({ months: 1 }).toMillis() * US_PER_MS;
  const at = (day: number, hour: number, minute = 0): number =>
    month.plus({ days: day - 1, hours: hour, minutes: minute }).toMillis() * US_PER_MS;
  const interval = (options.intervalMinutes ?? 5) * US_PER_MINUTE;
  const fridgeRule = { from: from - US_PER_MINUTE, enabled: true, okMin: 2, okMax: 8, graceMin: 15 };

  const channels: ReportChannel[] = [
    {
      channelId: 'chn_fridge1',
      sensorId: 'sen_fridge1',
      deviceId: 'dev_fridge1',
      deviceName: 'Cold room',
      deviceModel: 'Shelly Plus H&T',
      deviceDeletedAt: null,
      kind: 'temperature',
      label: 'Dairy shelf',
      unit: '°C',
      rules: [fridgeRule, { ...fridgeRule, from: at(18, 9, 30), okMax: 6 }],
    },
    {
      channelId: 'chn_fridge2',
      sensorId: 'sen_fridge2',
      deviceId: 'dev_fridge2',
      deviceName: 'Prep fridge',
      deviceModel: 'Shelly H&T Gen1',
      deviceDeletedAt: at(24, 16),
      kind: 'temperature',
      label: null,
      unit: '°C',
      rules: [fridgeRule],
    },
    {
      channelId: 'chn_freezer',
      sensorId: 'sen_freezer',
      deviceId: 'dev_freezer',
      deviceName: 'Freezer',
      deviceModel: 'LoRaWAN LHT65',
      deviceDeletedAt: null,
      kind: 'temperature',
      label: 'Probe',
      unit: '°C',
      rules: [{ from: from - US_PER_MINUTE, enabled: true, okMin: -25, okMax: -18, graceMin: 30 }],
    },
    {
      channelId: 'chn_humidity',
      sensorId: 'sen_humidity',
      deviceId: 'dev_fridge1',
      deviceName: 'Cold room',
      deviceModel: 'Shelly Plus H&T',
      deviceDeletedAt: null,
      kind: 'humidity',
      label: null,
      unit: '%',
      rules: [{ from: from - US_PER_MINUTE, enabled: false, okMin: 0, okMax: 100, graceMin: 0 }],
    },
  ];
  for (let i = 0; i < (options.channels ?? 0); i++) {
    channels.push({
      ...channels[0]!,
      channelId: `chn_extra${i}`,
      sensorId: `sen_extra${i}`,
      deviceId: `dev_extra${i}`,
      deviceName: `Display fridge ${String(i + 1).padStart(2, '0')}`,
      label: null,
    });
  }

  const series = async (channelId: string): Promise<ReportSeries> => {
    const channel = channels.find((c) => c.channelId === channelId)!;
    const end = Math.min(to, channel.deviceDeletedAt ?? to);
    const n = Math.floor((end - from) / interval);
    const ts = new Float64Array(n);
    const values = new Float64Array(n);
    const rnd = random(channelId.length * 7919 + channelId.charCodeAt(channelId.length - 1));
    const doorOpenFrom = at(12, 14, 5);
    const doorOpenTo = at(12, 15, 10);
    const defrostFrom = at(5, 22, 30);
    const defrostTo = at(6, 1, 30);
    const outageFrom = at(20, 2);
    const outageTo = at(20, 7);
    let k = 0;
    for (let i = 0; i < n; i++) {
      const t = from + i * interval;
      if (channelId === 'chn_fridge1' && t >= outageFrom && t < outageTo) continue;
      const hour = ((t - from) / 3_600_000_000) % 24;
      const daily = Math.sin(((hour - 6) / 24) * 2 * Math.PI);
      let v: number;
      if (channel.kind === 'humidity') v = 62 + 8 * daily + rnd() * 3;
      else if (channelId === 'chn_freezer')
        v = -21 + 1.2 * daily + rnd() * 0.6 + (t >= defrostFrom && t < defrostTo ? 6 : 0);
      else v = 4.2 + 0.9 * daily + rnd() * 0.5;
      if (channelId === 'chn_fridge1' && t >= doorOpenFrom && t < doorOpenTo) {
        v = 8.4 + ((t - doorOpenFrom) / (doorOpenTo - doorOpenFrom)) * 3.2;
      }
      ts[k] = t;
      values[k] = Math.round(v * 100) / 100;
      k++;
    }
    return { ts: ts.subarray(0, k), values: values.subarray(0, k) };
  };

  return {
    report: {
      id: 'rpt_01JQ8ZKXW3Y5SAMPLE',
      template: options.template ?? 'haccp_monthly',
      language: options.language ?? 'en',
      createdAt: month.plus({ months: 1, hours: 2, minutes: 5 }).toMillis() * US_PER_MS,
      from,
      to,
    },
    account: { id: 'acc_sample', name: 'Bistro Lindenhof GmbH' },
    site: { id: 'sit_kitchen', name: 'Main kitchen', timezone: zone, vertical: 'food' },
    auditChainHead: {
      entryId: 'aud_01JQ90A1B2C3D4E5F6G7H8J9K0',
      hash: '3f9a1c27e0b84d5f96a2c1e7d8b3f40a5c6e9d1b2a7f8e3c4d5b6a7980f1e2d3',
      entries: 1287,
    },
    channels,
    alarms: [
      {
        eventId: 'evt_door',
        channelId: 'chn_fridge1',
        kind: 'threshold_high',
        startedAt: at(12, 14, 5),
        alarmAt: at(12, 14, 20),
        endedAt: at(12, 15, 10),
        okMin: 2,
        okMax: 8,
        peakValue: 11.6,
        silenced: false,
        acknowledgedAt: at(12, 14, 32),
        acknowledgedBy: 'chef@bistro-lindenhof.example',
        ackNote:
          'Door of the cold room left open during delivery; closed, goods checked with a probe: 7.9 °C core.',
        rule: null,
      },
      {
        eventId: 'evt_outage',
        channelId: 'chn_fridge1',
        kind: 'no_data',
        startedAt: at(20, 2),
        alarmAt: at(20, 2, 30),
        endedAt: at(20, 7),
        okMin: null,
        okMax: null,
        peakValue: null,
        silenced: false,
        acknowledgedAt: null,
        acknowledgedBy: null,
        ackNote: null,
        rule: { name: 'Cold room offline', severity: 'critical' },
      },
      {
        eventId: 'evt_defrost',
        channelId: 'chn_freezer',
        kind: 'threshold_high',
        startedAt: at(5, 22, 30),
        alarmAt: at(5, 23, 0),
        endedAt: at(6, 1, 30),
        okMin: -25,
        okMax: -18,
        peakValue: -15.6,
        silenced: true,
        acknowledgedAt: at(6, 7, 45),
        acknowledgedBy: 'manager@bistro-lindenhof.example',
        ackNote: 'Planned defrost; goods kept in the cold room meanwhile.',
        rule: null,
      },
    ],
    silences: [
      {
        silenceId: 'sil_defrost',
        channelId: 'chn_freezer',
        from: at(5, 22),
        to: at(6, 2),
        reason: 'Monthly defrost of the freezer',
        createdBy: 'manager@bistro-lindenhof.example',
        createdAt: at(5, 21, 50),
      },
    ],
    thresholdChanges: [
      {
        ts: at(18, 9, 30),
        by: 'manager@bistro-lindenhof.example',
        channelId: 'chn_fridge1',
        before: { okMin: 2, okMax: 8 },
        after: { okMin: 2, okMax: 6 },
      },
    ],
    recomputes: [
      {
        ts: at(18, 9, 31),
        by: 'manager@bistro-lindenhof.example',
        channelId: 'chn_fridge1',
        replayed: 5040,
        eventsCreated: 0,
      },
    ],
    moves: [],
    series,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      template: { type: 'string' },
      language: { type: 'string' },
      timezone: { type: 'string' },
      channels: { type: 'string' },
      interval: { type: 'string' },
    },
  });
  const out = positionals[0];
  if (!out) {
    console.error(
      'usage: node --import tsx scripts/report-sample.ts <out.pdf> [--template t] [--language l]',
    );
    process.exit(2);
  }
  const input = sampleReportInput({
    template: (values.template ?? 'haccp_monthly') as ReportTemplate,
    language: (values.language ?? 'en') as ReportLanguage,
    ...(values.timezone ? { timezone: values.timezone } : {}),
    ...(values.channels ? { channels: Number(values.channels) } : {}),
    ...(values.interval ? { intervalMinutes: Number(values.interval) } : {}),
  });
  const rss = process.memoryUsage().rss;
  const started = performance.now();
  const pdf = await renderReport(input);
  const ms = performance.now() - started;
  fs.writeFileSync(out, pdf);
  const growth = (process.memoryUsage().rss - rss) / 1e6;
  console.log(`${out}: ${pdf.length} bytes in ${ms.toFixed(0)} ms, RSS growth ${growth.toFixed(0)} MB`);
}
