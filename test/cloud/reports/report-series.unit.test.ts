import { describe, expect, it } from '@jest/globals';
import {
  gatherReportInput,
  type ReportDataDeps,
  type ReportDataRepository,
} from '../../../cloud/src/reports/report-data.ts';
import type { ReportTemplate } from '../../../cloud/src/reports/report-input.ts';
import { renderReport } from '../../../cloud/src/reports/report-pdf.ts';

/**
 * What the report's series loader reads and holds, with a stubbed repository: eight devices with a
 * temperature, a humidity and a battery channel each, split over two measurement groups (seqs 1-12
 * and 64-75) and named so that the report asks for the groups' channels alternately.
 */
const HOUR = 3_600_000_000;
const STEP = 15 * 60_000_000;
const FROM = Date.UTC(2025, 2, 1) * 1000;
const TO = FROM + 48 * HOUR;
const PER_CHANNEL = (TO - FROM) / STEP;
const KINDS = ['temperature', 'humidity', 'battery'] as const;
const SITE = 'site-1';

const devices = Array.from({ length: 8 }, (_, i) => ({
  id: `dev-${i}`,
  site_id: SITE,
  // dev-0..3 are in group 0, dev-4..7 in group 1; by name the report alternates between them.
  name: `Fridge ${(i % 4) * 2 + (i < 4 ? 0 : 1)}`,
  model: 'T1',
  created_at: 0,
  deleted_at: null,
}));
const sensors = devices.flatMap((d, i) =>
  KINDS.map((kind, j) => ({
    seq: (i < 4 ? 1 : 64) + (i % 4) * KINDS.length + j,
    id: `sen-${i}-${kind}`,
    channel_id: `ch-${i}-${kind}`,
    device_id: d.id,
    kind,
    label: null,
    unit: kind === 'temperature' ? '°C' : '%',
    ok_min: 0,
    ok_max: 5,
    grace_min: 15,
    rule_enabled: 1,
  })),
);
const kindOf = new Map(sensors.map((s) => [s.seq, s.kind]));

/** Counts, per channel, the readings the loader was handed, and the most held at once. */
interface Probe {
  delivered: Map<number, number>;
  handedOut: number;
  peakHeld: number;
}

function stubbedDeps(probe: Probe, maxHeldSamples?: number): ReportDataDeps {
  const held = () => [...probe.delivered.values()].reduce((a, b) => a + b, 0) - probe.handedOut;
  const none = async () => [];
  const data = {
    site: async () => ({ id: SITE, name: 'Kitchen', timezone: 'Europe/Berlin', vertical: 'food' }),
    account: async () => ({ name: 'Acme' }),
    userEmails: async () => new Map(),
    devicesEverOnSite: async () => devices,
    sensorsOf: async () => sensors,
    ruleVersions: none,
    alarms: none,
    alertAlarms: none,
    silences: none,
    auditEntries: none,
    moves: none,
    siteNames: async () => new Map(),
    readingCounts: async (_db: unknown, seqs: number[], from: number, to: number) => {
      const start = Math.max(FROM, Math.floor(from / HOUR) * HOUR);
      const n = Math.max(0, Math.ceil((Math.min(to, TO) - start) / STEP));
      return new Map(seqs.map((s) => [s, n]));
    },
    groupScan: {
      readingsPerQuery: 64,
      read: async (
        _db: unknown,
        _grp: number,
        seqs: readonly number[],
        from: number,
        to: number,
        visit: (seq: number, ts: number, value: number) => void,
      ) => {
        const first = FROM + Math.ceil((from - FROM) / STEP) * STEP;
        for (let ts = first; ts < to; ts += STEP) {
          for (const seq of seqs) {
            visit(seq, ts, 3 + Math.sin(ts / 3e9 + seq));
            probe.delivered.set(seq, (probe.delivered.get(seq) ?? 0) + 1);
          }
        }
        probe.peakHeld = Math.max(probe.peakHeld, held());
      },
    },
  };
  return {
    db: {} as ReportDataDeps['db'],
    data: data as unknown as ReportDataRepository,
    placements: async () =>
      new Map(devices.map((d) => [d.id, { siteAt: () => SITE }])) as unknown as Awaited<
        ReturnType<ReportDataDeps['placements']>
      >,
    movesOf: async () => [],
    auditChainHead: async () => ({ entryId: null, hash: null, entries: 0 }),
    ...(maxHeldSamples === undefined ? {} : { maxHeldSamples }),
  };
}

/** Renders the report through the stub; `probe` records what was read and held. */
async function render(template: ReportTemplate, maxHeldSamples?: number) {
  const probe: Probe = { delivered: new Map(), handedOut: 0, peakHeld: 0 };
  const input = await gatherReportInput(stubbedDeps(probe, maxHeldSamples), {
    id: 'rpt-1',
    account_id: 'acc-1',
    site_id: SITE,
    template,
    language: 'en',
    period_from: FROM,
    period_to: TO,
    created_at: TO,
  } as Parameters<typeof gatherReportInput>[1]);
  const series = input.series.bind(input);
  input.series = async (channelId) => {
    const s = await series(channelId);
    probe.handedOut += s.ts.length;
    return s;
  };
  const pdf = await renderReport(input);
  return { probe, pdf };
}

describe('the report series loader', () => {
  it('reads only the channels the HACCP template draws, each once, and holds at most the budget', async () => {
    const { probe } = await render('haccp_monthly', 3 * PER_CHANNEL);
    const read = [...probe.delivered.keys()].sort((a, b) => a - b);
    expect(read.map((seq) => kindOf.get(seq))).toEqual(Array(8).fill('temperature'));
    expect([...probe.delivered.values()]).toEqual(Array(8).fill(PER_CHANNEL));
    expect(probe.handedOut).toBe(8 * PER_CHANNEL);
    // At most three channels' series held at once: none of humidity or battery, none already drawn.
    expect(probe.peakHeld).toBeLessThanOrEqual(3 * PER_CHANNEL);
  });

  it('reads every channel once for channel_summary, within the budget', async () => {
    const { probe } = await render('channel_summary', 4 * PER_CHANNEL);
    expect(probe.delivered.size).toBe(sensors.length);
    expect([...probe.delivered.values()]).toEqual(Array(sensors.length).fill(PER_CHANNEL));
    expect(probe.peakHeld).toBeLessThanOrEqual(4 * PER_CHANNEL);
  });

  it('holds a whole group when the budget allows, and the PDF does not depend on the budget', async () => {
    const whole = await render('haccp_monthly');
    // Each group's four temperature channels read in one scan; the report alternates between the
    // groups, so the second scan ends with the first group's three series still to be drawn.
    expect(whole.probe.peakHeld).toBe(7 * PER_CHANNEL);
    for (const budget of [1, 3 * PER_CHANNEL]) {
      const { pdf } = await render('haccp_monthly', budget);
      expect(pdf.equals(whole.pdf)).toBe(true);
    }
  });
});
