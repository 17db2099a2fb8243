import { afterEach, describe, expect, it } from '@jest/globals';
import { DATABASES } from '../../helpers/databases.ts';
import { at, MINUTE, rulesWorld, T0, type RulesWorld } from '../rules/world.ts';

/**
 * A rule changed several times (disabled, enabled with other conditions, moved to another
 * channel): each measurement is judged by the rule as it was at its `ts`, so the same readings give
 * the same events whether they arrive in order as the rule changes, or late and shuffled after
 * every change (docs/api/alert-rules.md#events-of-alert-rules).
 */
const READINGS: [minute: number, value: number][] = [
  [30, 9], // rule 1 (above 8, warning): opens
  [40, 7], // ends it
  [90, 11], // rule disabled: nothing
  [130, 9], // rule 3 (above 10, critical): fine
  [150, 10.5], // opens; the move to another channel at 180 ends it
  [200, 11], // the channel is no longer covered: nothing
];
const CHANGES: [minute: number, patch: (other: string) => Record<string, unknown>][] = [
  [60, () => ({ enabled: false })],
  [120, () => ({ enabled: true, conditions: [{ type: 'above', value: 10, severity: 'critical' }] })],
  [180, (other) => ({ channel_ids: [other] })],
];

describe.each(DATABASES)('alert rules changed over time on %s', (db) => {
  let w: RulesWorld;
  afterEach(async () => w?.t.stop());

  async function settle() {
    await w.t.cloud.services.rules.drain();
    await w.t.cloud.services.alertEngine.drain();
    await w.t.cloud.services.jobs.drain();
  }

  /** A world with the rule on its temperature channel; `order` says how readings and changes interleave. */
  async function run(order: 'in order' | 'late and shuffled') {
    w = await rulesWorld(db);
    const channel = await w.send(T0, 5);
    const other = await w.send(T0, 60, 'humidity');
    await settle();
    const rule = await w.t.http.post(
      '/v1/alert-rules',
      {
        name: 'Fridge',
        channel_ids: [channel],
        conditions: [{ type: 'above', value: 8, severity: 'warning' }],
      },
      { token: w.user.token },
    );
    expect(rule.status).toBe(201);
    const patch = async (minute: number, body: Record<string, unknown>) => {
      w.clock.set(T0 + minute * MINUTE);
      const answer = await w.t.http.patch(`/v1/alert-rules/${rule.json.id}`, body, { token: w.user.token });
      expect(answer.status).toBe(200);
      await settle();
    };
    const read = async (minute: number, value: number) => {
      w.clock.set(Math.max(w.clock.nowMicros(), T0 + minute * MINUTE));
      await w.send(T0 + minute * MINUTE, value);
      await settle();
    };
    if (order === 'in order') {
      const steps = [
        ...READINGS.map(([m, v]) => [m, () => read(m, v)] as const),
        ...CHANGES.map(([m, p]) => [m, () => patch(m, p(other))] as const),
      ].sort((a, b) => a[0] - b[0]);
      for (const [, step] of steps) await step();
    } else {
      for (const [m, p] of CHANGES) await patch(m, p(other));
      for (const i of [5, 1, 3, 0, 4, 2]) await read(...READINGS[i]!);
    }
    w.clock.set(T0 + 240 * MINUTE);
    await w.t.cloud.services.rules.tick();
    await settle();
    return (await w.events(`?rule_id=${rule.json.id}`)).map((e: any) => ({
      channel: e.channel_id === channel ? 'temperature' : e.channel_id,
      kind: e.kind,
      severity: e.severity,
      condition: e.condition,
      started_at: e.started_at,
      alarm_at: e.alarm_at,
      ended_at: e.ended_at,
      peak_value: e.peak_value,
      withdrawn_at: e.withdrawn_at,
    }));
  }

  it('gives the events of the rule in force at each ts, in order or late after every change', async () => {
    const inOrder = await run('in order');
    await w.t.stop();
    const late = await run('late and shuffled');
    expect(inOrder).toEqual([
      expect.objectContaining({
        channel: 'temperature',
        severity: 'critical',
        condition: expect.objectContaining({ type: 'above', value: 10 }),
        started_at: at(T0 + 150 * MINUTE),
        ended_at: at(T0 + 180 * MINUTE),
        peak_value: 10.5,
        withdrawn_at: null,
      }),
      expect.objectContaining({
        channel: 'temperature',
        severity: 'warning',
        condition: expect.objectContaining({ type: 'above', value: 8 }),
        started_at: at(T0 + 30 * MINUTE),
        ended_at: at(T0 + 40 * MINUTE),
        peak_value: 9,
        withdrawn_at: null,
      }),
    ]);
    expect(late).toEqual(inOrder);
  });
});
