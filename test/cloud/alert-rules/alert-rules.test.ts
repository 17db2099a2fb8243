import { afterEach, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs';
import path from 'node:path';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { startTestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { auditOf, createDevice } from '../../helpers/fixtures.ts';
import { at, decodeMail, MINUTE, rulesWorld, T0, type RulesWorld } from '../rules/world.ts';
import { addManager, escalatingRule, MANAGER, sendSettled, settleAlerts } from './settle.ts';

/**
 * Alert rules through a real server, with a clock that moves only when the test says
 * (docs/api/alert-rules.md). The device's simple rule (0..5 °C, grace 30 min) runs alongside;
 * alert-rule mails are told apart by their subject.
 */
describe.each(DATABASES)('alert rules on %s', (db) => {
  let w: RulesWorld;
  afterEach(async () => w?.t.stop());

  const SECOND = MANAGER;

  async function world(env: Record<string, string> = {}) {
    w = await rulesWorld(db, { env });
    await addManager(w);
    return w;
  }

  /** Everything after ingest or a clock move: rule engine, alert engine, jobs. */
  const settle = () => settleAlerts(w);

  async function tickAt(micros: number) {
    w.clock.set(micros);
    await w.t.cloud.services.rules.tick();
    await settle();
  }

  const send = (ts: number, value: number, type?: string) => sendSettled(w, ts, value, type);

  /** Alert-rule mails (subject starts with a severity, "Reminder" or "Resolved:" of an alert) by recipient. */
  async function alertMails(): Promise<{ to: string; subject: string }[]> {
    return (await w.outbox())
      .map((m) => ({ to: /^To: (.*)$/m.exec(m)?.[1] ?? '', subject: /^Subject: (.*)$/m.exec(m)?.[1] ?? '' }))
      .filter((m) =>
        /^(Reminder WARNING|Reminder CRITICAL|WARNING|CRITICAL|Resolved): .* \(.+\)$/.test(m.subject),
      );
  }

  const create = (body: unknown) => w.t.http.post('/v1/alert-rules', body, { token: w.user.token });

  it('creates, reads, lists, changes and deletes a rule, audit-logged with before and after', async () => {
    await world();
    const channel = await send(T0, 3);
    const body = {
      name: 'Fridge too warm',
      channel_ids: [channel],
      conditions: [
        { type: 'above', value: 8, hysteresis: 0.5, delay_min: 10, severity: 'warning' },
        { type: 'no_data', minutes: 30, severity: 'critical' },
      ],
      schedule: {
        timezone: 'Europe/Berlin',
        windows: [{ days: ['mon', 'tue'], from: '08:00', to: '18:00' }],
      },
      notify: { steps: [{ after_min: 0, user_ids: [w.user.userId] }], repeat_every_min: 30 },
    };
    const created = await create(body);
    expect(created.status).toBe(201);
    expect(created.json).toEqual({
      id: expect.stringMatching(/^alr_/),
      name: 'Fridge too warm',
      enabled: true,
      channel_ids: [channel],
      site_id: null,
      kind: null,
      conditions: body.conditions,
      schedule: body.schedule,
      notify: {
        steps: [{ after_min: 0, user_ids: [w.user.userId], webhook_ids: [], chat: [] }],
        repeat_every_min: 30,
      },
      created_at: at(T0),
      updated_at: at(T0),
    });
    const id = created.json.id;
    expect((await w.t.http.get(`/v1/alert-rules/${id}`, { token: w.user.token })).json).toEqual(created.json);
    const list = await w.t.http.get('/v1/alert-rules', { token: w.user.token });
    expect(list.json.data.map((r: any) => r.id)).toEqual([id]);

    const patched = await w.t.http.patch(
      `/v1/alert-rules/${id}`,
      { site_id: w.siteId, kind: 'temperature', name: 'All fridges' },
      { token: w.user.token },
    );
    expect(patched.status).toBe(200);
    expect(patched.json).toMatchObject({
      name: 'All fridges',
      channel_ids: null,
      site_id: w.siteId,
      kind: 'temperature',
    });

    expect(
      (await create({ ...body, conditions: [{ type: 'outside', min: 5, max: 2, severity: 'warning' }] })).json
        .error.code,
    ).toBe('invalid_range');
    expect((await create({ ...body, channel_ids: ['ch_nope'] })).json.error.code).toBe('channel_not_found');
    expect((await create({ ...body, site_id: w.siteId })).status).toBe(400);
    expect((await create({ ...body, conditions: [{ type: 'sideways', severity: 'warning' }] })).status).toBe(
      400,
    );

    expect((await w.t.http.delete(`/v1/alert-rules/${id}`, { token: w.user.token })).status).toBe(204);
    const gone = await w.t.http.get(`/v1/alert-rules/${id}`, { token: w.user.token });
    expect(gone.status).toBe(404);
    expect(gone.json.error.code).toBe('alert_rule_not_found');

    const changed = await auditOf(w.t, w.user.token, 'alert_rule.changed');
    expect(changed[0]!.details).toMatchObject({
      before: { name: 'Fridge too warm' },
      after: { name: 'All fridges' },
    });
    expect(await auditOf(w.t, w.user.token, 'alert_rule.created')).toHaveLength(1);
    expect(await auditOf(w.t, w.user.token, 'alert_rule.deleted')).toHaveLength(1);
  });

  it('escalates to step 2 after its delay, and an acknowledgement stops the chain', async () => {
    await world();
    const channel = await send(T0, 3);
    const rule = await create({
      name: 'Fridge',
      channel_ids: [channel],
      conditions: [{ type: 'above', value: 8, hysteresis: 0.5, severity: 'critical' }],
      notify: {
        steps: [
          { after_min: 0, user_ids: [w.user.userId] },
          { after_min: 30, user_ids: ['usr_manager'] },
        ],
        repeat_every_min: 60,
      },
    });
    expect(rule.status).toBe(201);
    await send(T0 + MINUTE, 9);
    const [event] = await w.events(`?rule_id=${rule.json.id}`);
    expect(event).toMatchObject({
      kind: 'threshold_high',
      state: 'open',
      channel_id: channel,
      rule_id: rule.json.id,
      severity: 'critical',
      condition: { index: 0, type: 'above', value: 8, hysteresis: 0.5, delay_min: 0, severity: 'critical' },
      started_at: at(T0 + MINUTE),
      alarm_at: at(T0 + MINUTE),
      ok_min: null,
      ok_max: 8,
      peak_value: 9,
    });
    expect(await alertMails()).toEqual([
      { to: w.user.email, subject: expect.stringMatching(/^CRITICAL: .*above 8/) },
    ]);
    const sensor = await w.sensor(channel);
    expect(sensor.alert_severity).toBe('critical');
    expect(['ok', 'grace', 'alarm', 'silent', 'no_data']).toContain(sensor.state);

    await tickAt(T0 + 30 * MINUTE);
    expect(await alertMails()).toHaveLength(1);
    await tickAt(T0 + 31 * MINUTE);
    expect((await alertMails()).map((m) => m.to)).toEqual([w.user.email, SECOND]);

    const ack = await w.t.http.post(
      `/v1/events/${event.id}/ack`,
      { note: 'door fixed' },
      { token: w.user.token },
    );
    expect(ack.status).toBe(200);
    expect(ack.json).toMatchObject({ id: event.id, rule_id: rule.json.id, ack_note: 'door fixed' });
    await tickAt(T0 + 200 * MINUTE);
    expect(await alertMails()).toHaveLength(2);
  });

  it('escalates after a restart: the next step is a job in the database, not a timer', async () => {
    await world();
    const channel = await send(T0, 3);
    await escalatingRule(w, channel, 30);
    await send(T0 + MINUTE, 9);
    expect(await alertMails()).toHaveLength(1);
    // a second process of the same installation; the first one stops before step 2 is due
    const clock = new ManualClock(T0 + 31 * MINUTE);
    const next = await startTestCloud({ db, clock, sameDatabaseAs: w.t });
    try {
      await w.t.cloud.stop();
      await next.cloud.services.jobs.drain();
      const dir = path.join(w.t.database.dataDir, 'outbox');
      const to = fs
        .readdirSync(dir)
        .map((f) => decodeMail(fs.readFileSync(path.join(dir, f), 'utf8')))
        .filter((m) => /^Subject: CRITICAL: /m.test(m))
        .map((m) => /^To: (.*)$/m.exec(m)![1]);
      expect(to.sort()).toEqual([w.user.email, SECOND].sort());
    } finally {
      await next.stop();
    }
  });

  it('repeats every N minutes until the alarm ends, with a hysteresis against flapping', async () => {
    await world();
    const channel = await send(T0, 3);
    const rule = await create({
      name: 'Fridge',
      channel_ids: [channel],
      conditions: [{ type: 'above', value: 8, hysteresis: 0.5, severity: 'warning' }],
      notify: { steps: [{ after_min: 0, user_ids: [w.user.userId] }], repeat_every_min: 15 },
    });
    await send(T0 + MINUTE, 8.2);
    await send(T0 + 5 * MINUTE, 7.8); // within the hysteresis: still on
    await send(T0 + 10 * MINUTE, 8.3);
    await tickAt(T0 + 16 * MINUTE);
    await tickAt(T0 + 31 * MINUTE);
    const subjects = (await alertMails()).map((m) => m.subject);
    expect(subjects).toEqual([
      expect.stringMatching(/^WARNING: /),
      expect.stringMatching(/^Reminder WARNING: /),
      expect.stringMatching(/^Reminder WARNING: /),
    ]);
    await send(T0 + 40 * MINUTE, 7.4); // below 7.5: ends
    await tickAt(T0 + 100 * MINUTE);
    expect((await alertMails()).map((m) => m.subject)).toEqual([
      ...subjects,
      expect.stringMatching(/^Resolved: /),
    ]);
    const events = await w.events(`?rule_id=${rule.json.id}`);
    expect(events).toEqual([
      expect.objectContaining({
        state: 'resolved',
        started_at: at(T0 + MINUTE),
        ended_at: at(T0 + 40 * MINUTE),
        peak_value: 8.3,
      }),
    ]);
  });

  it('raises a rate-of-change alarm, posts it to Slack in its shape and to a chosen signed webhook', async () => {
    const received: any[] = [];
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        received.push({ path: req.url, headers: req.headers, body: JSON.parse(body) });
        res.end('ok');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      await world({ WEBHOOK_ALLOW_PRIVATE: 'true' });
      const port = (server.address() as AddressInfo).port;
      const channel = await send(T0, 3);
      const hook = await w.t.http.post(
        '/v1/webhooks',
        { url: `http://127.0.0.1:${port}/hook`, events: ['report.ready'] },
        { token: w.user.token },
      );
      expect(hook.status).toBe(201);
      const rule = await create({
        name: 'Door left open',
        channel_ids: [channel],
        conditions: [
          { type: 'rate_of_change', change: 2, within_min: 15, direction: 'rise', severity: 'warning' },
        ],
        notify: {
          steps: [
            {
              after_min: 0,
              webhook_ids: [hook.json.id],
              chat: [{ type: 'slack', url: `http://127.0.0.1:${port}/services/T/B/x` }],
            },
          ],
        },
      });
      await send(T0 + 5 * MINUTE, 3.5);
      await send(T0 + 10 * MINUTE, 5.8); // +2.8 within 10 minutes
      const [event] = await w.events(`?rule_id=${rule.json.id}`);
      expect(event).toMatchObject({
        kind: 'rate_of_change',
        state: 'open',
        started_at: at(T0 + 10 * MINUTE),
        peak_value: expect.closeTo(2.8, 6),
        condition: { type: 'rate_of_change', change: 2, within_min: 15, direction: 'rise' },
      });
      await eventually(() => received.length >= 2, 'the webhook and the Slack post');
      const signed = received.find((r) => r.path === '/hook');
      expect(signed.headers['x-service-signature']).toMatch(/^t=\d+,v1=/);
      expect(signed.body).toMatchObject({
        type: 'alarm.opened',
        data: { id: event.id, rule_id: rule.json.id },
      });
      expect(received.filter((r) => r.path !== '/hook')).toEqual([
        {
          path: '/services/T/B/x',
          headers: expect.anything(),
          body: {
            text: expect.stringMatching(/^WARNING: .*rose by more than 2 °C within 15 min/),
            blocks: [expect.objectContaining({ type: 'section' })],
          },
        },
      ]);
    } finally {
      server.close();
    }
  });

  it('raises no_data on one channel of a device whose other channel keeps reporting', async () => {
    await world();
    const temperature = await send(T0, 3);
    const humidity = await send(T0, 60, 'humidity');
    const rule = await create({
      name: 'Probe silent',
      site_id: w.siteId,
      kind: 'temperature',
      conditions: [{ type: 'no_data', minutes: 30, severity: 'critical' }],
      notify: { steps: [{ after_min: 0, user_ids: ['usr_manager'] }] },
    });
    for (let m = 10; m <= 20; m += 10) await send(T0 + m * MINUTE, 61, 'humidity');
    await tickAt(T0 + 30 * MINUTE - 1);
    expect(await w.events(`?rule_id=${rule.json.id}`)).toEqual([]);
    await tickAt(T0 + 30 * MINUTE);
    const events = await w.events(`?rule_id=${rule.json.id}`);
    expect(events).toEqual([
      expect.objectContaining({
        kind: 'no_data',
        channel_id: temperature,
        state: 'open',
        started_at: at(T0),
        alarm_at: at(T0 + 30 * MINUTE),
        severity: 'critical',
      }),
    ]);
    await send(T0 + 40 * MINUTE, 61, 'humidity');
    expect(events.some((e: any) => e.channel_id === humidity)).toBe(false);
    expect(await alertMails()).toEqual([
      { to: SECOND, subject: expect.stringMatching(/^CRITICAL: .*no data for 30 min/) },
    ]);
    await send(T0 + 45 * MINUTE, 3);
    expect(await w.events(`?rule_id=${rule.json.id}`)).toEqual([
      expect.objectContaining({ state: 'resolved', ended_at: at(T0 + 45 * MINUTE) }),
    ]);
  });

  it('gives the same events for late, out-of-order data as for data in order', async () => {
    await world();
    const channel = await send(T0, 3);
    const rule = await create({
      name: 'Fridge',
      channel_ids: [channel],
      conditions: [{ type: 'above', value: 8, hysteresis: 0.5, delay_min: 10, severity: 'warning' }],
    });
    w.clock.set(T0 + 120 * MINUTE);
    for (const [m, v] of [
      [50, 7],
      [20, 9],
      [40, 9.5],
      [30, 7.8],
      [10, 5],
    ] as const)
      await send(T0 + m * MINUTE, v);
    expect(await w.events(`?rule_id=${rule.json.id}`)).toEqual([
      expect.objectContaining({
        started_at: at(T0 + 20 * MINUTE),
        alarm_at: at(T0 + 30 * MINUTE),
        ended_at: at(T0 + 50 * MINUTE),
        peak_value: 9.5,
      }),
    ]);
  });

  it('judges late data by the rule version in force at its ts', async () => {
    await world();
    const channel = await send(T0, 3);
    const rule = await create({
      name: 'Fridge',
      channel_ids: [channel],
      conditions: [{ type: 'above', value: 8, severity: 'warning' }],
      notify: { steps: [{ after_min: 5, user_ids: [w.user.userId] }] },
    });
    await tickAt(T0 + 60 * MINUTE);
    const patched = await w.t.http.patch(
      `/v1/alert-rules/${rule.json.id}`,
      { conditions: [{ type: 'above', value: 10, severity: 'critical' }] },
      { token: w.user.token },
    );
    expect(patched.status).toBe(200);
    await send(T0 + 70 * MINUTE, 9); // under the new rule: fine
    await send(T0 + 30 * MINUTE, 9); // late, under the old rule: an alarm
    await send(T0 + 40 * MINUTE, 7);
    expect(await w.events(`?rule_id=${rule.json.id}`)).toEqual([
      expect.objectContaining({
        severity: 'warning',
        condition: expect.objectContaining({ type: 'above', value: 8 }),
        started_at: at(T0 + 30 * MINUTE),
        ended_at: at(T0 + 40 * MINUTE),
      }),
    ]);
    // the first step waits its 5 minutes from the opening (at 10:70), even for an alarm that ended
    expect(await alertMails()).toEqual([]);
    await tickAt(T0 + 75 * MINUTE);
    expect(await alertMails()).toEqual([{ to: w.user.email, subject: expect.stringMatching(/^WARNING: /) }]);
  });

  it("ends a rule's open alarms when the device is deleted or the rule is", async () => {
    await world();
    const channel = await send(T0, 3);
    const rule = await create({
      name: 'Fridge',
      channel_ids: [channel],
      conditions: [
        { type: 'above', value: 8, severity: 'warning' },
        { type: 'above', value: 8.5, severity: 'critical' },
      ],
    });
    const other = await create({
      name: 'Fridge too',
      channel_ids: [channel],
      conditions: [{ type: 'above', value: 8, severity: 'critical' }],
    });
    await send(T0 + MINUTE, 9);
    expect((await w.sensor(channel)).alert_severity).toBe('critical');
    w.clock.set(T0 + 10 * MINUTE);
    expect((await w.t.http.delete(`/v1/alert-rules/${other.json.id}`, { token: w.user.token })).status).toBe(
      204,
    );
    await settle();
    expect(await w.events(`?rule_id=${other.json.id}`)).toEqual([
      expect.objectContaining({ state: 'resolved', ended_at: at(T0 + 10 * MINUTE) }),
    ]);
    expect(await w.events(`?rule_id=${rule.json.id}&state=open`)).toHaveLength(2);
    w.clock.set(T0 + 20 * MINUTE);
    expect((await w.t.http.delete(`/v1/devices/${w.device.id}`, { token: w.user.token })).status).toBe(204);
    await tickAt(T0 + 21 * MINUTE);
    expect(await w.events(`?rule_id=${rule.json.id}`)).toEqual([
      expect.objectContaining({ state: 'resolved', ended_at: at(T0 + 20 * MINUTE) }),
      expect.objectContaining({ state: 'resolved', ended_at: at(T0 + 20 * MINUTE) }),
    ]);
  });

  it('covers a channel that appears on the site after the rule, from its appearance', async () => {
    await world();
    await send(T0, 3);
    const rule = await create({
      name: 'Every fridge',
      site_id: w.siteId,
      kind: 'temperature',
      conditions: [
        { type: 'above', value: 8, severity: 'warning' },
        { type: 'no_data', minutes: 30, severity: 'critical' },
      ],
    });
    w.clock.set(T0 + 60 * MINUTE);
    const second = await createDevice(w.t, w.user.token, w.siteId, {
      local_id: 'fridge-2',
      name: 'Fridge 2',
    });
    const channel = await w.send(T0 + 60 * MINUTE, 9, 'temperature', second);
    await settle();
    const events = (await w.events(`?rule_id=${rule.json.id}&channel_id=${channel}`)).map((e: any) => [
      e.kind,
      e.started_at,
    ]);
    expect(events).toEqual([['threshold_high', at(T0 + 60 * MINUTE)]]);
  });
});
