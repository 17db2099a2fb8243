import { afterEach, describe, expect, it } from '@jest/globals';
import { DATABASES } from '../../helpers/databases.ts';
import { alarmMails, at, MINUTE, rulesWorld, T0, type RulesWorld } from './world.ts';

/**
 * The rule engine as a fridge owner meets it (docs/api/rules.md), with a clock
 * that moves only when the test says: food service, 0..5 °C, grace 30 min, no data after 60 min.
 */
describe.each(DATABASES)('rule engine scenarios on %s', (db) => {
  let w: RulesWorld;
  afterEach(async () => w?.t.stop());

  it('gives no alarm for an excursion shorter than the grace period', async () => {
    w = await rulesWorld(db);
    const channel = await w.send(T0, 3);
    await w.tickAt(T0 + 5 * MINUTE);
    await w.send(T0 + 5 * MINUTE, 7.5);
    await w.settle();
    expect((await w.sensor(channel)).state).toBe('grace');
    await w.tickAt(T0 + 25 * MINUTE);
    await w.send(T0 + 25 * MINUTE, 4);
    await w.settle();
    await w.tickAt(T0 + 80 * MINUTE);
    expect(await w.events()).toEqual([]);
    expect((await w.sensor(channel)).state).toBe('ok');
    expect(alarmMails(await w.outbox())).toEqual([]);
  });

  it('from a backlog: records and tells an excursion back in range exactly when its grace ends', async () => {
    // A data logger's readings arrive hours late, sampled at the grace's multiple: the alarm has no
    // length. Recorded, it must be told (every recorded alarm is).
    w = await rulesWorld(db);
    const channel = await w.send(T0, 3);
    await w.settle();
    w.clock.set(T0 + 95 * MINUTE);
    for (const [ts, value] of [
      [T0 + 10 * MINUTE, 7.5],
      [T0 + 20 * MINUTE, 7.5],
      [T0 + 30 * MINUTE, 7.5],
      [T0 + 40 * MINUTE, 4],
      [T0 + 60 * MINUTE, 7.5],
      [T0 + 91 * MINUTE, 4],
    ] as const)
      await w.send(ts, value);
    await w.settle();
    const events = await w.events();
    expect(events.map((e: Record<string, unknown>) => [e.started_at, e.alarm_at, e.ended_at])).toEqual([
      [at(T0 + 60 * MINUTE), at(T0 + 90 * MINUTE), at(T0 + 91 * MINUTE)],
      [at(T0 + 10 * MINUTE), at(T0 + 40 * MINUTE), at(T0 + 40 * MINUTE)],
    ]);
    const subjects = alarmMails(await w.outbox()).map((m) => /^Subject: (.*)$/m.exec(m)?.[1] ?? '');
    expect(subjects).toEqual([
      expect.stringMatching(/^Alarm \(already over\): Fridge temperature above 5 °C/),
      expect.stringMatching(/^Alarm \(already over\): Fridge temperature above 5 °C/),
    ]);
    expect((await w.sensor(channel)).state).toBe('ok');
  });

  it('keeps an alarm opened meanwhile when a pass that began before it evaluates the channel later', async () => {
    // A pass takes its time once and evaluates its channels in chunks; a later chunk judging at
    // the pass's start, before the alarm a read's settle opened since, withdrew that alarm.
    w = await rulesWorld(db);
    const channel = await w.send(T0, 3);
    w.clock.set(T0 + 5 * MINUTE);
    await w.send(T0 + 5 * MINUTE, 7.5);
    await w.settle();
    await w.tickAt(T0 + 36 * MINUTE);
    const [opened] = await w.events();
    expect(opened.state).toBe('open');
    const seq = await w.seqOf(channel);
    await w.t.cloud.services.rules.evaluate([seq], T0 + 34 * MINUTE);
    await w.settle();
    const [after] = await w.t.http
      .get(`/v1/events?channel_id=${channel}&include_withdrawn=true`, { token: w.user.token })
      .then((a) => a.json.data);
    expect(after).toMatchObject({ id: opened.id, state: 'open', withdrawn_at: null });
    const subjects = alarmMails(await w.outbox()).map((m) => /^Subject: (.*)$/m.exec(m)?.[1] ?? '');
    expect(subjects).toEqual(['ALARM: Fridge temperature above 5 °C at Kitchen']);
  });

  it('tells an alarm stamped ahead of the server clock (a device clock that runs fast) when its moment comes', async () => {
    w = await rulesWorld(db);
    await w.send(T0, 3);
    await w.settle();
    // The whole excursion arrives at once, stamped up to 50 minutes ahead.
    await w.send(T0 + 10 * MINUTE, 7.5);
    await w.send(T0 + 50 * MINUTE, 4);
    await w.settle();
    expect(alarmMails(await w.outbox())).toEqual([]);
    const subjects = async () =>
      alarmMails(await w.outbox()).map((m) => /^Subject: (\S+)/m.exec(m)?.[1] ?? '');
    await w.tickAt(T0 + 41 * MINUTE);
    expect(await subjects()).toEqual(['ALARM:']);
    // and its end when the server's clock reaches it, not before
    await w.tickAt(T0 + 49 * MINUTE);
    expect(await subjects()).toEqual(['ALARM:']);
    await w.tickAt(T0 + 50 * MINUTE);
    expect(await subjects()).toEqual(['ALARM:', 'Resolved:']);
  });

  it('raises one alarm at exactly started_at + grace, without a new sample, and resolves it back in range', async () => {
    w = await rulesWorld(db);
    const channel = await w.send(T0, 3);
    await w.settle();
    expect((await w.sensor(channel)).state).toBe('ok');
    w.clock.set(T0 + 5 * MINUTE);
    await w.send(T0 + 5 * MINUTE, 7.5);
    await w.tickAt(T0 + 15 * MINUTE);
    await w.send(T0 + 15 * MINUTE, 8.25);
    await w.settle();
    await w.tickAt(T0 + 35 * MINUTE - 1);
    expect(await w.events()).toEqual([]);
    expect((await w.sensor(channel)).state).toBe('grace');

    await w.tickAt(T0 + 35 * MINUTE);
    const [event] = await w.events();
    expect(event).toEqual({
      id: expect.stringMatching(/^evt_/),
      kind: 'threshold_high',
      sensor_id: expect.stringMatching(/^snr_/),
      channel_id: channel,
      device_id: w.device.id,
      site_id: w.siteId,
      state: 'open',
      started_at: at(T0 + 5 * MINUTE),
      alarm_at: at(T0 + 35 * MINUTE),
      ended_at: null,
      ok_min: 0,
      ok_max: 5,
      peak_value: 8.25,
      silenced: false,
      acknowledged_at: null,
      acknowledged_by: null,
      ack_note: null,
      withdrawn_at: null,
      created_at: at(T0 + 35 * MINUTE),
      updated_at: at(T0 + 35 * MINUTE),
    });
    expect((await w.sensor(channel)).state).toBe('alarm');
    // a second tick at the same moment changes nothing
    await w.tickAt(T0 + 36 * MINUTE);
    expect(await w.events()).toHaveLength(1);

    w.clock.set(T0 + 40 * MINUTE);
    await w.send(T0 + 40 * MINUTE, 4);
    await w.settle();
    const resolved = await w.events();
    expect(resolved).toEqual([
      expect.objectContaining({
        id: event.id,
        state: 'resolved',
        ended_at: at(T0 + 40 * MINUTE),
        peak_value: 8.25,
      }),
    ]);
    expect((await w.sensor(channel)).state).toBe('ok');
    const mails = alarmMails(await w.outbox());
    expect(mails).toHaveLength(2);
    expect(mails[0]).toMatch(/^Subject: ALARM: Fridge temperature above 5 °C at Kitchen$/m);
    expect(mails[1]).toMatch(/^Subject: Resolved: Fridge temperature above 5 °C at Kitchen$/m);
  });

  it('alarms at once with grace 0, and a low excursion is threshold_low with its lowest value', async () => {
    w = await rulesWorld(db);
    const channel = await w.send(T0, 3);
    await w.settle();
    const sensor = await w.sensor(channel);
    expect(
      (await w.t.http.patch(`/v1/sensors/${sensor.id}`, { grace_min: 0 }, { token: w.user.token })).status,
    ).toBe(200);
    w.clock.set(T0 + MINUTE);
    await w.send(T0 + MINUTE, -1.5);
    await w.send(T0 + 2 * MINUTE, -2.5);
    await w.settle();
    expect(await w.events()).toEqual([
      expect.objectContaining({
        kind: 'threshold_low',
        state: 'open',
        started_at: at(T0 + MINUTE),
        alarm_at: at(T0 + MINUTE),
        peak_value: -2.5,
      }),
    ]);
    expect((await w.sensor(channel)).state).toBe('alarm');
  });

  it('alarms at once for a leak', async () => {
    w = await rulesWorld(db);
    const channel = await w.send(T0, 0, 'leak');
    await w.settle();
    expect((await w.sensor(channel)).state).toBe('ok');
    w.clock.set(T0 + MINUTE);
    await w.send(T0 + MINUTE, 1, 'leak');
    await w.settle();
    expect(await w.events()).toEqual([
      expect.objectContaining({
        kind: 'threshold_high',
        channel_id: channel,
        started_at: at(T0 + MINUTE),
        alarm_at: at(T0 + MINUTE),
        ok_min: 0,
        ok_max: 0,
        peak_value: 1,
      }),
    ]);
    expect((await w.sensor(channel)).state).toBe('alarm');
  });

  it('gives no_data after no_data_min minutes without a sample, and resolves it when data comes back', async () => {
    w = await rulesWorld(db);
    const channel = await w.send(T0, 3);
    await w.tickAt(T0 + 60 * MINUTE - 1);
    expect(await w.events()).toEqual([]);
    expect((await w.sensor(channel)).state).toBe('ok');
    await w.tickAt(T0 + 60 * MINUTE);
    expect(await w.events()).toEqual([
      expect.objectContaining({
        kind: 'no_data',
        state: 'open',
        started_at: at(T0 + 60 * MINUTE),
        alarm_at: at(T0 + 60 * MINUTE),
        peak_value: null,
      }),
    ]);
    expect((await w.sensor(channel)).state).toBe('no_data');
    w.clock.set(T0 + 70 * MINUTE);
    await w.send(T0 + 70 * MINUTE, 3.5);
    await w.settle();
    expect(await w.events()).toEqual([
      expect.objectContaining({ kind: 'no_data', state: 'resolved', ended_at: at(T0 + 70 * MINUTE) }),
    ]);
    expect((await w.sensor(channel)).state).toBe('ok');
  });

  it('records an alarm inside a silence window with silenced: true and sends nothing', async () => {
    w = await rulesWorld(db, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    const hook = await w.t.http.post(
      '/v1/webhooks',
      { url: 'http://127.0.0.1:9/never', events: ['alarm.opened', 'alarm.resolved'] },
      { token: w.user.token },
    );
    expect(hook.status).toBe(201);
    const channel = await w.send(T0, 3);
    await w.settle();
    const sensor = await w.sensor(channel);
    const silence = await w.t.http.post(
      `/v1/sensors/${sensor.id}/silence`,
      { from: at(T0), to: at(T0 + 120 * MINUTE), reason: 'defrost' },
      { token: w.user.token },
    );
    expect(silence.status).toBe(201);
    await w.settle();
    expect((await w.sensor(channel)).state).toBe('silent');
    w.clock.set(T0 + 10 * MINUTE);
    await w.send(T0 + 10 * MINUTE, 9);
    await w.tickAt(T0 + 50 * MINUTE);
    await w.send(T0 + 50 * MINUTE, 9);
    await w.send(T0 + 60 * MINUTE, 3);
    await w.settle();
    expect(await w.events()).toEqual([
      expect.objectContaining({
        kind: 'threshold_high',
        silenced: true,
        state: 'resolved',
        alarm_at: at(T0 + 40 * MINUTE),
      }),
    ]);
    expect(alarmMails(await w.outbox())).toEqual([]);
    const deliveries = await w.t.http.get(`/v1/webhooks/${hook.json.id}/deliveries`, { token: w.user.token });
    expect(deliveries.json.data).toEqual([]);
  });

  it('announces a silenced alarm that outlasts its window when the window ends', async () => {
    w = await rulesWorld(db);
    const channel = await w.send(T0, 3);
    await w.settle();
    const sensor = await w.sensor(channel);
    await w.t.http.post(
      `/v1/sensors/${sensor.id}/silence`,
      { from: at(T0), to: at(T0 + 60 * MINUTE), reason: 'delivery' },
      { token: w.user.token },
    );
    w.clock.set(T0 + 10 * MINUTE);
    await w.send(T0 + 10 * MINUTE, 9);
    await w.tickAt(T0 + 59 * MINUTE);
    expect(await w.events()).toEqual([expect.objectContaining({ silenced: true, state: 'open' })]);
    expect(alarmMails(await w.outbox())).toEqual([]);
    await w.tickAt(T0 + 60 * MINUTE);
    const mails = alarmMails(await w.outbox());
    expect(mails).toHaveLength(1);
    expect(mails[0]).toMatch(/^Subject: ALARM: /m);
    expect(mails[0]).toContain('began inside a silence window');
  });

  it('ends a silence window early with DELETE, and the alarm is announced then', async () => {
    w = await rulesWorld(db);
    const channel = await w.send(T0, 3);
    await w.settle();
    const sensor = await w.sensor(channel);
    const silence = await w.t.http.post(
      `/v1/sensors/${sensor.id}/silence`,
      { from: at(T0), to: at(T0 + 600 * MINUTE), reason: 'cleaning' },
      { token: w.user.token },
    );
    w.clock.set(T0 + 10 * MINUTE);
    await w.send(T0 + 10 * MINUTE, 9);
    await w.tickAt(T0 + 45 * MINUTE);
    expect(alarmMails(await w.outbox())).toEqual([]);
    expect((await w.t.http.delete(`/v1/silences/${silence.json.id}`, { token: w.user.token })).status).toBe(
      204,
    );
    await w.settle();
    expect(alarmMails(await w.outbox())).toHaveLength(1);
    expect((await w.sensor(channel)).state).toBe('alarm');
    const listed = await w.t.http.get(`/v1/sensors/${sensor.id}/silences`, { token: w.user.token });
    expect(listed.json.data).toEqual([
      expect.objectContaining({ id: silence.json.id, to: at(T0 + 45 * MINUTE), ended_by: w.user.userId }),
    ]);
  });

  it('holds the "Resolved" notice of an alarm that ends inside a silence window until the window ends', async () => {
    w = await rulesWorld(db, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    const hook = await w.t.http.post(
      '/v1/webhooks',
      { url: 'http://127.0.0.1:9/never', events: ['alarm.opened', 'alarm.resolved'] },
      { token: w.user.token },
    );
    const deliveries = async () =>
      (await w.t.http.get(`/v1/webhooks/${hook.json.id}/deliveries`, { token: w.user.token })).json.data.map(
        (d: any) => d.type,
      );
    const subjects = async () => alarmMails(await w.outbox()).map((m) => /^Subject: (\w+)/m.exec(m)![1]);
    const channel = await w.send(T0, 9);
    await w.tickAt(T0 + 30 * MINUTE);
    expect(await subjects()).toEqual(['ALARM']);
    expect(await deliveries()).toEqual(['alarm.opened']);

    const sensor = await w.sensor(channel);
    const silence = await w.t.http.post(
      `/v1/sensors/${sensor.id}/silence`,
      { from: at(T0 + 35 * MINUTE), to: at(T0 + 95 * MINUTE), reason: 'defrost' },
      { token: w.user.token },
    );
    expect(silence.status).toBe(201);
    w.clock.set(T0 + 40 * MINUTE);
    await w.send(T0 + 40 * MINUTE, 3);
    await w.settle();
    await w.tickAt(T0 + 95 * MINUTE - 1);
    expect(await w.events()).toEqual([expect.objectContaining({ state: 'resolved' })]);
    expect(await subjects()).toEqual(['ALARM']);
    expect(await deliveries()).toEqual(['alarm.opened']);

    await w.tickAt(T0 + 95 * MINUTE);
    expect(await subjects()).toEqual(['ALARM', 'Resolved']);
    expect((await deliveries()).sort()).toEqual(['alarm.opened', 'alarm.resolved']);
  });

  it('gives silent and no events when the rule is disabled', async () => {
    w = await rulesWorld(db);
    const channel = await w.send(T0, 3);
    await w.settle();
    const sensor = await w.sensor(channel);
    await w.t.http.patch(`/v1/sensors/${sensor.id}`, { rule_enabled: false }, { token: w.user.token });
    await w.settle();
    expect((await w.sensor(channel)).state).toBe('silent');
    for (let m = 1; m <= 50; m += 7) {
      w.clock.set(T0 + m * MINUTE);
      await w.send(T0 + m * MINUTE, 30);
    }
    await w.tickAt(T0 + 55 * MINUTE);
    expect(await w.events()).toEqual([]);
    expect((await w.sensor(channel)).state).toBe('silent');
    await w.tickAt(T0 + 200 * MINUTE);
    expect(await w.events()).toEqual([]);
    expect((await w.sensor(channel)).state).toBe('no_data');
  });

  it('closes an open alarm when the rule is disabled, and judges data by the rule of its own time', async () => {
    w = await rulesWorld(db);
    const channel = await w.send(T0, 9);
    await w.tickAt(T0 + 40 * MINUTE);
    const sensor = await w.sensor(channel);
    expect(await w.events()).toEqual([expect.objectContaining({ state: 'open' })]);
    await w.t.http.patch(`/v1/sensors/${sensor.id}`, { rule_enabled: false }, { token: w.user.token });
    await w.settle();
    expect(await w.events()).toEqual([
      expect.objectContaining({ state: 'resolved', ended_at: at(T0 + 40 * MINUTE), ok_max: 5 }),
    ]);
  });

  it('finds the excursion in a late backlog with its true started_at and ended_at', async () => {
    w = await rulesWorld(db);
    // the site was offline for five hours; its gateway now sends what it buffered, all at once
    w.clock.set(T0 + 300 * MINUTE);
    const values = [3, 3, 6, 7, 8, 7.5, 6, 3, 2, 2];
    await Promise.all(values.map((v, i) => w.send(T0 + i * 10 * MINUTE, v)));
    await w.send(T0 + 300 * MINUTE, 3);
    await w.settle();
    const events = await w.events();
    expect(events.filter((e: any) => e.kind !== 'no_data')).toEqual([
      expect.objectContaining({
        kind: 'threshold_high',
        state: 'resolved',
        started_at: at(T0 + 20 * MINUTE),
        alarm_at: at(T0 + 50 * MINUTE),
        ended_at: at(T0 + 70 * MINUTE),
        peak_value: 8,
      }),
    ]);
    // between the backlog's last reading (T0+90) and the live one (T0+300) nothing was measured
    expect(events.filter((e: any) => e.kind === 'no_data')).toEqual([
      expect.objectContaining({ started_at: at(T0 + 150 * MINUTE), ended_at: at(T0 + 300 * MINUTE) }),
    ]);
    // a missed alarm that is already over is still announced, once
    const mails = alarmMails(await w.outbox());
    expect(
      mails.filter((m) => /^Subject: Alarm \(already over\): Fridge temperature above/m.test(m)),
    ).toHaveLength(1);
  });

  it('splits a long excursion where a late in-range reading falls, however far back it reaches', async () => {
    w = await rulesWorld(db);
    w.clock.set(T0 + 80 * MINUTE);
    await w.send(T0, 3);
    for (let i = 1; i <= 80; i++) await w.send(T0 + i * MINUTE, 9);
    await w.settle();
    expect(await w.events()).toEqual([
      expect.objectContaining({
        started_at: at(T0 + MINUTE),
        alarm_at: at(T0 + 31 * MINUTE),
        ended_at: null,
      }),
    ]);
    // 40 readings out of range lie between the late one and the last reading in range before it
    await w.send(T0 + 40 * MINUTE + 30_000_000, 3);
    await w.settle();
    const events = await w.events();
    expect(events.map((e: any) => [e.kind, e.started_at, e.alarm_at, e.ended_at])).toEqual(
      expect.arrayContaining([
        ['threshold_high', at(T0 + MINUTE), at(T0 + 31 * MINUTE), at(T0 + 40 * MINUTE + 30_000_000)],
        ['threshold_high', at(T0 + 41 * MINUTE), at(T0 + 71 * MINUTE), null],
      ]),
    );
    expect(events).toHaveLength(2);
  });

  it('withdraws an alarm that late data shows did not last the grace period', async () => {
    w = await rulesWorld(db);
    await w.send(T0, 9);
    await w.tickAt(T0 + 31 * MINUTE);
    const [alarm] = await w.events();
    expect(alarm).toMatchObject({ state: 'open', started_at: at(T0) });
    // a reading from T0+20 arrives late: the fridge was back in range after 20 minutes
    await w.send(T0 + 20 * MINUTE, 3);
    await w.settle();
    expect(await w.events()).toEqual([]);
    const all = await w.events('?include_withdrawn=true');
    expect(all).toEqual([
      expect.objectContaining({ id: alarm.id, state: 'resolved', withdrawn_at: at(T0 + 31 * MINUTE) }),
    ]);
    const mails = alarmMails(await w.outbox());
    expect(mails.map((m) => /^Subject: (\w+)/m.exec(m)![1])).toEqual(['ALARM', 'Withdrawn']);
  });
});
