import { afterEach, describe, expect, it } from '@jest/globals';
import { DATABASES } from '../../helpers/databases.ts';
import { at, MINUTE, rulesWorld, T0, type RulesWorld } from '../rules/world.ts';
import { sendSettled, settleAlerts } from './settle.ts';

/**
 * The worked examples of docs/api/alert-rules.md, through a real server with a clock that moves
 * only when the test says (no_data and rate_of_change: alert-rules.test.ts). The reference's 10:00
 * is `B` here, an hour after the world begins, so the rule exists before the first reading.
 */
const HOUR = 60 * MINUTE;
const B = T0 + HOUR;

describe.each(DATABASES)('the worked examples of the alert-rule reference on %s', (db) => {
  let w: RulesWorld;
  let channel: string;
  let ruleId: string;
  afterEach(async () => w?.t.stop());

  const settle = () => settleAlerts(w);

  const send = (ts: number, value: number, type?: string) => sendSettled(w, ts, value, type);

  async function tickAt(micros: number) {
    w.clock.set(micros);
    await w.t.cloud.services.rules.tick();
    await settle();
  }

  async function withRule(condition: Record<string, unknown>, schedule: unknown = null) {
    w = await rulesWorld(db);
    channel = await w.send(T0, 5);
    await settle();
    const rule = await w.t.http.post(
      '/v1/alert-rules',
      { name: 'Example', channel_ids: [channel], conditions: [condition], schedule },
      { token: w.user.token },
    );
    expect(rule.status).toBe(201);
    ruleId = rule.json.id;
  }

  const events = () => w.events(`?rule_id=${ruleId}`);

  it('above, with delay and hysteresis: one alarm from 10:15 to 10:20 for 8.2 → 7.8 → 8.4 → 7.4', async () => {
    await withRule({ type: 'above', value: 8, hysteresis: 0.5, delay_min: 10, severity: 'warning' });
    await send(B, 7);
    await send(B + 5 * MINUTE, 8.2);
    await send(B + 10 * MINUTE, 7.8);
    expect(await events()).toEqual([]);
    await send(B + 15 * MINUTE, 8.4);
    expect(await events()).toEqual([
      expect.objectContaining({
        kind: 'threshold_high',
        state: 'open',
        severity: 'warning',
        started_at: at(B + 5 * MINUTE),
        alarm_at: at(B + 15 * MINUTE),
      }),
    ]);
    await send(B + 20 * MINUTE, 7.4);
    expect(await events()).toEqual([
      expect.objectContaining({
        state: 'resolved',
        started_at: at(B + 5 * MINUTE),
        alarm_at: at(B + 15 * MINUTE),
        ended_at: at(B + 20 * MINUTE),
        peak_value: 8.4,
        ok_max: 8,
      }),
    ]);
  });

  it('below: 1.8 opens an alarm at once, 2.3 does not end it, 2.5 does', async () => {
    await withRule({ type: 'below', value: 2, hysteresis: 0.5, severity: 'critical' });
    await send(B, 1.8);
    expect(await events()).toEqual([
      expect.objectContaining({
        kind: 'threshold_low',
        state: 'open',
        severity: 'critical',
        started_at: at(B),
        alarm_at: at(B),
        ok_min: 2,
        ok_max: null,
      }),
    ]);
    await send(B + 5 * MINUTE, 2.3);
    expect((await events()).map((e: any) => e.state)).toEqual(['open']);
    await send(B + 10 * MINUTE, 2.5);
    expect(await events()).toEqual([
      expect.objectContaining({ state: 'resolved', ended_at: at(B + 10 * MINUTE), peak_value: 1.8 }),
    ]);
  });

  it('outside a range: an alarm after 15 minutes unless a reading came back within [2.5, 7.5]', async () => {
    await withRule({
      type: 'outside',
      min: 2,
      max: 8,
      hysteresis: 0.5,
      delay_min: 15,
      severity: 'warning',
    });
    await send(B, 8.6);
    await send(B + 5 * MINUTE, 7.8); // not back within 7.5: the excursion goes on
    await tickAt(B + 15 * MINUTE - 1);
    expect(await events()).toEqual([]);
    await tickAt(B + 15 * MINUTE); // no reading at 10:15: the delay alone opens it
    expect(await events()).toEqual([
      expect.objectContaining({
        kind: 'threshold_high',
        state: 'open',
        started_at: at(B),
        alarm_at: at(B + 15 * MINUTE),
        ok_min: 2,
        ok_max: 8,
      }),
    ]);
    await send(B + 20 * MINUTE, 5);

    await send(B + 30 * MINUTE, 8.6);
    await send(B + 35 * MINUTE, 7.4); // back within the range before the delay: no alarm
    await tickAt(B + 60 * MINUTE);
    expect(await events()).toHaveLength(1);

    await send(B + 70 * MINUTE, 1.5);
    await tickAt(B + 85 * MINUTE);
    // newest first
    expect((await events()).map((e: any) => [e.kind, e.state, e.started_at, e.alarm_at])).toEqual([
      ['threshold_low', 'open', at(B + 70 * MINUTE), at(B + 85 * MINUTE)],
      ['threshold_high', 'resolved', at(B), at(B + 15 * MINUTE)],
    ]);
  });

  it('opening hours only: an excursion before 08:00 Berlin opens at 08:00, one on Saturday waits for Monday', async () => {
    // T0 is Monday 2026-01-05 10:00 UTC; Berlin is UTC+1 in January
    const tuesday0710 = T0 + 20 * HOUR + 10 * MINUTE; // 06:10 UTC
    const tuesday0800 = T0 + 21 * HOUR; // 07:00 UTC
    const saturday1000 = T0 + 4 * 24 * HOUR + 23 * HOUR; // Saturday 09:00 UTC
    const monday0800 = T0 + 7 * 24 * HOUR - 3 * HOUR; // Monday 2026-01-12 07:00 UTC
    await withRule(
      { type: 'above', value: 8, severity: 'warning' },
      {
        timezone: 'Europe/Berlin',
        windows: [{ days: ['mon', 'tue', 'wed', 'thu', 'fri'], from: '08:00', to: '18:00' }],
      },
    );
    await send(tuesday0710, 9);
    await tickAt(tuesday0800 - 1);
    expect(await events()).toEqual([]);
    await tickAt(tuesday0800);
    expect(await events()).toEqual([
      expect.objectContaining({ state: 'open', started_at: at(tuesday0710), alarm_at: at(tuesday0800) }),
    ]);
    await send(tuesday0800 + HOUR, 5);

    await send(saturday1000, 9);
    for (const t of [saturday1000 + 10 * HOUR, saturday1000 + 30 * HOUR, monday0800 - 1]) {
      await tickAt(t);
      expect(await events()).toHaveLength(1);
    }
    await tickAt(monday0800);
    expect((await events()).map((e: any) => [e.state, e.started_at, e.alarm_at])).toEqual([
      ['open', at(saturday1000), at(monday0800)],
      ['resolved', at(tuesday0710), at(tuesday0800)],
    ]);
  });
});
