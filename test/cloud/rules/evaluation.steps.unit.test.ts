import { describe, expect, it } from '@jest/globals';
import {
  anchorBefore,
  awaitsNotice,
  desiredEvents,
  dueNotifications,
  EVALUATION_STEPS,
  newEvaluation,
  planChannel,
  readSamples,
  readSilences,
  trackerRow,
  type EvaluationEnv,
  type EvaluationRepository,
} from '../../../cloud/src/rules/evaluation.steps.ts';
import type { Sample } from '../../../cloud/src/rules/derive.ts';
import type { AlarmEventRow } from '../../../cloud/src/events/events.repository.ts';
import type { ChannelRow, TrackerRow } from '../../../cloud/src/rules/rules.repository.ts';
import { BEGINNING, RuleTimeline, type Rule } from '../../../cloud/src/rules/timeline.ts';

/**
 * The steps of a rule evaluation that decide without writing: where a channel's derivation starts,
 * what is read for all channels together, which events are wanted, which notifications are due and
 * where the tracker moves. The steps that write are covered through the engine on both databases
 * (evaluation.steps.test.ts and the scenarios).
 */

const MINUTE = 60_000_000;
const T0 = Date.UTC(2026, 10, 1) * 1000;
const at = (minutes: number) => T0 + minutes * MINUTE;
const RULE: Rule = { okMin: 2, okMax: 8, graceMin: 10, enabled: true, noDataMin: 60 };
const db = {} as never; // the steps under test hand it to the repository only

function channel(over: Partial<ChannelRow> = {}): ChannelRow {
  return {
    seq: 1,
    id: 'snr_1',
    channel_id: 'chn_1',
    account_id: 'acc_1',
    device_id: 'dev_1',
    kind: 'temperature',
    unit: 'C',
    ok_min: RULE.okMin,
    ok_max: RULE.okMax,
    grace_min: RULE.graceMin,
    rule_enabled: 1,
    no_data_min: RULE.noDataMin,
    state: 'ok',
    last_ts: null,
    eval_from: null,
    eval_gen: 0,
    site_id: 'sit_1',
    device_deleted_at: null,
    ...over,
  };
}

function tracker(over: Partial<TrackerRow> = {}): TrackerRow {
  return {
    sensor_seq: 1,
    last_ts: null,
    run_kind: null,
    run_start: null,
    run_peak: null,
    has_open: 0,
    due_at: null,
    updated_at: 0,
    ...over,
  };
}

function event(over: Partial<AlarmEventRow> = {}): AlarmEventRow {
  return {
    id: 'evt_1',
    account_id: 'acc_1',
    site_id: 'sit_1',
    device_id: 'dev_1',
    sensor_id: 'snr_1',
    channel_id: 'chn_1',
    sensor_seq: 1,
    kind: 'threshold_high',
    started_at: at(0),
    alarm_at: at(10),
    ended_at: null,
    ok_min: 2,
    ok_max: 8,
    peak_value: 12,
    silenced: 0,
    acknowledged_at: null,
    acknowledged_by: null,
    ack_note: null,
    withdrawn_at: null,
    notified_open_at: null,
    notified_resolved_at: null,
    created_at: at(0),
    updated_at: at(0),
    ...over,
  };
}

/** Samples newest first before `before`, as `samplesBefore` answers them; records each read. */
function samplesBeforeOf(samples: Sample[]) {
  const reads: { before: number; limit: number }[] = [];
  return {
    reads,
    repo: {
      samplesBefore: async (_db: unknown, _seq: number, before: number, limit?: number) => {
        reads.push({ before, limit: limit! });
        return samples
          .filter((s) => s.ts < before)
          .sort((a, b) => b.ts - a.ts)
          .slice(0, limit);
      },
    },
  };
}

const timeline = RuleTimeline.constant(RULE);

describe('rule evaluation steps', () => {
  it('run as plan, read samples, read silences, evaluate each channel, save trackers, notify, tell followers', () => {
    expect(EVALUATION_STEPS.map((s) => s.name)).toEqual([
      'planChannels',
      'readSamples',
      'readSilences',
      'evaluateChannels',
      'saveTrackers',
      'notifyTransitions',
      'tellFollowers',
    ]);
  });

  describe('planChannel', () => {
    it('continues from the tracker, with its open run, when only newer data arrived', async () => {
      const { repo, reads } = samplesBeforeOf([]);
      const t = tracker({
        last_ts: at(5),
        run_kind: 'threshold_high',
        run_start: at(3),
        run_peak: 11,
        has_open: 1,
      });
      const plan = await planChannel(
        db,
        repo,
        channel({ eval_from: at(6), last_ts: at(7) }),
        t,
        timeline,
        undefined,
      );
      expect(plan).toEqual({
        seed: { lastTs: at(5), run: { kind: 'threshold_high', start: at(3), peak: 11 } },
        readAfter: at(5),
        mustLoadEvents: true,
      });
      expect(reads).toEqual([]);
    });

    it('reads nothing for a tick alone (no new data since the tracker)', async () => {
      const { repo } = samplesBeforeOf([]);
      const plan = await planChannel(
        db,
        repo,
        channel({ last_ts: at(5) }),
        tracker({ last_ts: at(5) }),
        timeline,
        undefined,
      );
      expect(plan.readAfter).toBeNull();
      expect(plan.mustLoadEvents).toBe(false);
    });

    it('re-derives late data from the newest in-range sample before it', async () => {
      const { repo } = samplesBeforeOf([
        { ts: at(1), value: 5 }, // in range: the anchor
        { ts: at(2), value: 12 }, // out of range: an excursion may span it
      ]);
      const plan = await planChannel(
        db,
        repo,
        channel({ eval_from: at(3), last_ts: at(9) }),
        tracker({ last_ts: at(9) }),
        timeline,
        undefined,
      );
      expect(plan).toEqual({ seed: { lastTs: at(1), run: null }, readAfter: at(1), mustLoadEvents: true });
    });

    it('moves a channel whose rule is always disabled along without reading', async () => {
      const { repo, reads } = samplesBeforeOf([{ ts: at(1), value: 50 }]);
      const off = RuleTimeline.constant({ ...RULE, enabled: false });
      const plan = await planChannel(
        db,
        repo,
        channel({ eval_from: at(1), last_ts: at(4) }),
        undefined,
        off,
        undefined,
      );
      expect(plan).toEqual({ seed: { lastTs: at(4), run: null }, readAfter: null, mustLoadEvents: false });
      expect(reads).toEqual([]);
    });

    it('replays from `replayFrom` even when the tracker is ahead', async () => {
      const { repo } = samplesBeforeOf([{ ts: at(0), value: 5 }]);
      const plan = await planChannel(
        db,
        repo,
        channel({ last_ts: at(9) }),
        tracker({ last_ts: at(9) }),
        timeline,
        at(2),
      );
      expect(plan).toEqual({ seed: { lastTs: at(0), run: null }, readAfter: at(0), mustLoadEvents: true });
    });
  });

  it('anchorBefore reads a few samples first, then more at a time, and answers null when none qualifies', async () => {
    const high = Array.from({ length: 20 }, (_, i) => ({ ts: at(i), value: 20 }));
    const { repo, reads } = samplesBeforeOf(high);
    expect(await anchorBefore(db, repo, 1, at(20), timeline)).toBeNull();
    expect(reads.map((r) => r.limit)).toEqual([8, 32]);
  });

  it('readSamples reads every channel that needs samples in one call, up to what the fold has seen', async () => {
    const calls: { seq: number; after: number; until: number }[][] = [];
    const repository = {
      samplesAfterMany: async (_db: unknown, wanted: { seq: number; after: number; until: number }[]) => {
        calls.push(wanted);
        return new Map([[1, [{ ts: at(6), value: 4 }]]]);
      },
    } as unknown as EvaluationRepository;
    const env: EvaluationEnv = { repository, notifier: { notify: async () => undefined } };
    const ev = newEvaluation([1, 2, 3], at(10));
    const seed = { lastTs: null, run: null };
    ev.channels = [
      {
        c: channel({ seq: 1, last_ts: at(6) }),
        timeline,
        seed,
        readAfter: at(5),
        mustLoadEvents: false,
        samples: [],
      },
      { c: channel({ seq: 2 }), timeline, seed, readAfter: null, mustLoadEvents: false, samples: [] },
      {
        c: channel({ seq: 3, last_ts: null }),
        timeline,
        seed,
        readAfter: BEGINNING,
        mustLoadEvents: true,
        samples: [],
      },
    ];
    await readSamples(ev, db, env);
    expect(calls).toEqual([
      [
        { seq: 1, after: at(5), until: at(6) },
        { seq: 3, after: BEGINNING, until: Number.MAX_SAFE_INTEGER },
      ],
    ]);
    expect(ev.channels.map((p) => p.samples)).toEqual([[{ ts: at(6), value: 4 }], [], []]);
  });

  it('readSilences reads the windows from the earliest start of any derivation', async () => {
    const asked: number[] = [];
    const repository = {
      silences: async (_db: unknown, _seqs: readonly number[], from: number) => {
        asked.push(from);
        return new Map([[1, [{ from: at(0), to: at(5) }]]]);
      },
    } as unknown as EvaluationRepository;
    const ev = newEvaluation([1, 2], at(10));
    ev.channels = [
      {
        c: channel(),
        timeline,
        seed: { lastTs: at(4), run: { kind: 'threshold_high', start: at(2), peak: 9 } },
        readAfter: null,
        mustLoadEvents: false,
        samples: [],
      },
      {
        c: channel({ seq: 2 }),
        timeline,
        seed: { lastTs: at(3), run: null },
        readAfter: null,
        mustLoadEvents: false,
        samples: [],
      },
    ];
    await readSilences(ev, db, { repository, notifier: { notify: async () => undefined } });
    expect(asked).toEqual([at(2)]);
    expect(ev.silences.get(1)).toEqual([{ from: at(0), to: at(5) }]);
  });

  it('desiredEvents marks an event silenced when its alarm time lies in a silence window', () => {
    const derived = {
      kind: 'threshold_high' as const,
      startedAt: at(0),
      alarmAt: at(10),
      endedAt: null,
      peak: 12,
      okMin: 2,
      okMax: 8,
    };
    const derivation = {
      events: [derived, { ...derived, startedAt: at(30), alarmAt: at(40) }],
      tail: { lastTs: at(40), run: null },
    };
    expect(desiredEvents(derivation, [{ from: at(5), to: at(15) }]).map((e) => e.silenced)).toEqual([
      true,
      false,
    ]);
  });

  describe('dueNotifications', () => {
    it('announces an alarm that has begun', () => {
      expect(dueNotifications(event(), [], at(11))).toEqual({ opened: true, resolved: false });
    });

    it('announces nothing before the alarm time, nor an event silenced throughout', () => {
      expect(dueNotifications(event(), [], at(9))).toBeNull();
      expect(dueNotifications(event({ ended_at: at(20) }), [{ from: at(0), to: at(30) }], at(40))).toBeNull();
    });

    it('announces the opening once the silence window ends', () => {
      expect(dueNotifications(event(), [{ from: at(0), to: at(30) }], at(20))).toBeNull();
      expect(dueNotifications(event(), [{ from: at(0), to: at(30) }], at(31))).toEqual({
        opened: true,
        resolved: false,
      });
    });

    it('announces the end of an announced event, and of one that opens and ends in the same evaluation', () => {
      expect(dueNotifications(event({ notified_open_at: at(11), ended_at: at(20) }), [], at(21))).toEqual({
        opened: false,
        resolved: true,
      });
      expect(dueNotifications(event({ ended_at: at(20) }), [], at(21))).toEqual({
        opened: true,
        resolved: true,
      });
    });

    it('holds the end of an announced event that falls inside a silence window until the window ends', () => {
      const ended = event({ notified_open_at: at(11), ended_at: at(20) });
      const windows = [{ from: at(15), to: at(30) }];
      expect(dueNotifications(ended, windows, at(25))).toBeNull();
      expect(awaitsNotice(ended)).toBe(true);
      expect(dueNotifications(ended, windows, at(30))).toEqual({ opened: false, resolved: true });
      expect(awaitsNotice({ ...ended, notified_resolved_at: at(30) })).toBe(false);
    });

    it('announces a withdrawal only of an event that was announced', () => {
      expect(dueNotifications(event({ withdrawn_at: at(12) }), [], at(12))).toBeNull();
      expect(dueNotifications(event({ notified_open_at: at(11), withdrawn_at: at(12) }), [], at(12))).toEqual(
        {
          opened: false,
          resolved: true,
        },
      );
    });
  });

  it('trackerRow keeps the open run, whether an event is open, and the next due time', () => {
    const derivation = {
      events: [],
      tail: { lastTs: at(5), run: { kind: 'threshold_high' as const, start: at(4), peak: 13 } },
    };
    const row = trackerRow(1, derivation, timeline, [], [event({ ended_at: at(3) })], at(6));
    expect(row).toEqual({
      sensor_seq: 1,
      last_ts: at(5),
      run_kind: 'threshold_high',
      run_start: at(4),
      run_peak: 13,
      has_open: 0,
      due_at: at(14), // the grace of the run ends 10 minutes after it began
      updated_at: at(6),
    });
    expect(trackerRow(1, derivation, timeline, [], [event()], at(6)).has_open).toBe(1);
  });
});
