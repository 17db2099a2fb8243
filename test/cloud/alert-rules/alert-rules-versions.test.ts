import { afterEach, describe, expect, it } from '@jest/globals';
import { DATABASES } from '../../helpers/databases.ts';
import { createSite } from '../../helpers/fixtures.ts';
import { at, MINUTE, rulesWorld, T0, type RulesWorld } from '../rules/world.ts';
import { settleAlerts } from './settle.ts';

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

  const settle = () => settleAlerts(w);

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

/**
 * A rule on every channel of a kind on a site judges a measurement by the site its device was on at
 * the measurement's `ts` (docs/api/resources.md, device moves): a move ends the old site's alarm
 * at `effective_at` and the new site's rule judges from then, whether the move is recorded ahead of
 * time, at its time, or afterwards with the data arriving late.
 */
describe.each(DATABASES)('alert rules of a site and device moves on %s', (db) => {
  let w: RulesWorld;
  afterEach(async () => w?.t.stop());

  const settle = () => settleAlerts(w);

  async function run(order: 'moved ahead of time' | 'in order' | 'moved afterwards, data late') {
    w = await rulesWorld(db);
    await w.send(T0, 5);
    await settle();
    const siteB = (await createSite(w.t, w.user.token, { name: 'Store B', vertical: 'food_service' })).id;
    const rule = async (siteId: string, severity: string) => {
      const answer = await w.t.http.post(
        '/v1/alert-rules',
        {
          name: `Fridges ${severity}`,
          site_id: siteId,
          kind: 'temperature',
          conditions: [{ type: 'above', value: 8, severity }],
        },
        { token: w.user.token },
      );
      expect(answer.status).toBe(201);
      return answer.json.id as string;
    };
    const onA = await rule(w.siteId, 'warning');
    const onB = await rule(siteB, 'critical');
    const move = async () => {
      const answer = await w.t.http.post(
        `/v1/devices/${w.device.id}/move`,
        { to_site_id: siteB, effective_at: at(T0 + 10 * MINUTE) },
        { token: w.user.token },
      );
      expect(answer.status).toBe(200);
      await settle();
    };
    const read = async (minute: number, value: number) => {
      w.clock.set(Math.max(w.clock.nowMicros(), T0 + minute * MINUTE));
      await w.send(T0 + minute * MINUTE, value);
      await settle();
    };
    if (order === 'moved ahead of time') {
      await move(); // pending until 10:10, applied by its job
      await read(1, 9);
      await read(5, 9.2);
      w.clock.set(T0 + 10 * MINUTE);
      await settle();
      await read(20, 9.5);
      await read(40, 3);
    } else if (order === 'in order') {
      await read(1, 9);
      await read(5, 9.2);
      w.clock.set(T0 + 10 * MINUTE);
      await move();
      await read(20, 9.5);
      await read(40, 3);
    } else {
      await read(1, 9);
      w.clock.set(T0 + 30 * MINUTE);
      await move();
      await read(40, 3);
      await read(20, 9.5);
      await read(5, 9.2);
    }
    expect((await w.t.http.get(`/v1/devices/${w.device.id}`, { token: w.user.token })).json.site_id).toBe(
      siteB,
    );
    const view = (e: any) => [e.site_id, e.severity, e.state, e.started_at, e.ended_at, e.peak_value];
    return {
      a: (await w.events(`?rule_id=${onA}`)).map(view),
      b: (await w.events(`?rule_id=${onB}`)).map(view),
      siteA: w.siteId,
      siteB,
    };
  }

  it.each(['moved ahead of time', 'in order', 'moved afterwards, data late'] as const)(
    'judges each measurement by the rule of the site the device was on at its ts (%s)',
    async (order) => {
      const { a, b, siteA, siteB } = await run(order);
      expect(a).toEqual([[siteA, 'warning', 'resolved', at(T0 + MINUTE), at(T0 + 10 * MINUTE), 9.2]]);
      expect(b).toEqual([[siteB, 'critical', 'resolved', at(T0 + 20 * MINUTE), at(T0 + 40 * MINUTE), 9.5]]);
    },
  );
});
