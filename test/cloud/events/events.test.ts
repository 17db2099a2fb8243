import { afterEach, describe, expect, it } from '@jest/globals';
import { DATABASES } from '../../helpers/databases.ts';
import { signUp } from '../../helpers/cloud.ts';
import { at, MINUTE, rulesWorld, T0, type RulesWorld } from '../rules/world.ts';

describe.each(DATABASES)('alarm events API on %s', (db) => {
  let w: RulesWorld;
  afterEach(async () => w?.t.stop());

  /** Two alarms: one resolved (T0+0..40), one open (from T0+60), and a no-data one resolved. */
  async function twoAlarms() {
    w = await rulesWorld(db);
    const channel = await w.send(T0, 9);
    await w.tickAt(T0 + 40 * MINUTE);
    await w.send(T0 + 40 * MINUTE, 3);
    w.clock.set(T0 + 60 * MINUTE);
    await w.send(T0 + 60 * MINUTE, 9);
    await w.tickAt(T0 + 95 * MINUTE);
    return channel;
  }

  it('lists events newest first with filters, pages them, and gets one', async () => {
    const channel = await twoAlarms();
    const all = await w.events();
    expect(all.map((e) => [e.state, e.started_at])).toEqual([
      ['open', at(T0 + 60 * MINUTE)],
      ['resolved', at(T0)],
    ]);
    expect((await w.events('?state=open')).map((e) => e.started_at)).toEqual([at(T0 + 60 * MINUTE)]);
    expect((await w.events('?state=resolved')).map((e) => e.started_at)).toEqual([at(T0)]);
    expect(await w.events(`?site_id=${w.siteId}&channel_id=${channel}`)).toHaveLength(2);
    expect(await w.events(`?from=${at(T0 + MINUTE)}`)).toHaveLength(1);
    expect(await w.events(`?to=${at(T0 + MINUTE)}`)).toHaveLength(1);
    expect(await w.events('?kind=no_data')).toEqual([]);
    const page1 = await w.t.http.get('/v1/events?limit=1', { token: w.user.token });
    expect(page1.json).toMatchObject({ has_more: true, data: [{ id: all[0].id }] });
    const page2 = await w.t.http.get(`/v1/events?limit=1&cursor=${page1.json.next_cursor}`, {
      token: w.user.token,
    });
    expect(page2.json).toEqual({
      data: [expect.objectContaining({ id: all[1].id })],
      next_cursor: null,
      has_more: false,
    });
    const one = await w.t.http.get(`/v1/events/${all[1].id}`, { token: w.user.token });
    expect(one.status).toBe(200);
    expect(one.json).toEqual(all[1]);
  });

  it('answers 404 for unknown ids and for filters naming what is not the account’s, 400 for bad queries', async () => {
    await twoAlarms();
    const token = { token: w.user.token };
    const cases: [string, number, string][] = [
      ['/v1/events/evt_nope', 404, 'event_not_found'],
      ['/v1/events?site_id=site_nope', 404, 'site_not_found'],
      ['/v1/events?channel_id=chn_nope', 404, 'channel_not_found'],
      ['/v1/events?sensor_id=snr_nope', 404, 'sensor_not_found'],
      ['/v1/events?rule_id=alr_nope', 404, 'alert_rule_not_found'],
      ['/v1/events?state=closed', 400, 'invalid_request'],
      ['/v1/events?from=yesterday', 400, 'invalid_request'],
      ['/v1/events?limit=501', 400, 'invalid_request'],
    ];
    for (const [path, status, code] of cases) {
      const answer = await w.t.http.get(path, token);
      expect([path, answer.status, answer.json.error.code]).toEqual([path, status, code]);
    }
    const other = await signUp(w.t, 'other@example.com');
    const [event] = await w.events();
    const foreign = await w.t.http.get(`/v1/events/${event.id}`, { token: other.token });
    expect(foreign.status).toBe(404);
    expect((await w.t.http.get('/v1/events', { token: other.token })).json.data).toEqual([]);
  });

  it('acknowledges once with a note; a second ack is 409 already_acknowledged and keeps the first note', async () => {
    await twoAlarms();
    const [open] = await w.events('?state=open');
    w.clock.set(T0 + 100 * MINUTE);
    const ack = await w.t.http.post(
      `/v1/events/${open.id}/ack`,
      { note: 'moved the stock to fridge 2' },
      { token: w.user.token },
    );
    expect(ack.status).toBe(200);
    expect(ack.json).toEqual({
      ...open,
      acknowledged_at: at(T0 + 100 * MINUTE),
      acknowledged_by: w.user.userId,
      ack_note: 'moved the stock to fridge 2',
      updated_at: at(T0 + 100 * MINUTE),
    });
    const again = await w.t.http.post(
      `/v1/events/${open.id}/ack`,
      { note: 'again' },
      { token: w.user.token },
    );
    expect(again.status).toBe(409);
    expect(again.json.error).toEqual({
      code: 'already_acknowledged',
      message: expect.any(String),
      request_id: expect.stringMatching(/^req_/),
    });
    expect((await w.t.http.get(`/v1/events/${open.id}`, { token: w.user.token })).json.ack_note).toBe(
      'moved the stock to fridge 2',
    );
    // the acknowledgement survives the event resolving
    w.clock.set(T0 + 110 * MINUTE);
    await w.send(T0 + 110 * MINUTE, 3);
    await w.settle();
    expect((await w.t.http.get(`/v1/events/${open.id}`, { token: w.user.token })).json).toMatchObject({
      state: 'resolved',
      ack_note: 'moved the stock to fridge 2',
    });
  });

  it('refuses a bad ack body with 400, an unknown event with 404, and a read token with 403', async () => {
    await twoAlarms();
    const [event] = await w.events();
    const token = { token: w.user.token };
    for (const body of [{}, { note: 5 }, { note: 'x', extra: true }, { note: 'x'.repeat(2001) }]) {
      const answer = await w.t.http.post(`/v1/events/${event.id}/ack`, body, token);
      expect([JSON.stringify(body).slice(0, 30), answer.status, answer.json.error.code]).toEqual([
        JSON.stringify(body).slice(0, 30),
        400,
        'invalid_request',
      ]);
    }
    expect((await w.t.http.post('/v1/events/evt_nope/ack', { note: 'x' }, token)).json.error.code).toBe(
      'event_not_found',
    );
    const read = await w.t.http.post('/v1/tokens', { label: 'r', scope: 'read' }, token);
    const forbidden = await w.t.http.post(
      `/v1/events/${event.id}/ack`,
      { note: 'x' },
      { token: read.json.token },
    );
    expect([forbidden.status, forbidden.json.error.code]).toEqual([403, 'forbidden']);
  });

  it('validates silence windows: 422 invalid_range when to is not after from, 400 for a bad body, 404 for unknown ids', async () => {
    await twoAlarms();
    const [event] = await w.events();
    const token = { token: w.user.token };
    const path = `/v1/sensors/${event.sensor_id}/silence`;
    const backwards = await w.t.http.post(path, { from: at(T0 + MINUTE), to: at(T0), reason: 'x' }, token);
    expect([backwards.status, backwards.json.error.code]).toEqual([422, 'invalid_range']);
    const empty = await w.t.http.post(path, { from: at(T0), to: at(T0), reason: 'x' }, token);
    expect([empty.status, empty.json.error.code]).toEqual([422, 'invalid_range']);
    for (const body of [
      { from: '2026-01-05T10:00:00', to: at(T0 + MINUTE), reason: 'x' },
      { from: at(T0), to: at(T0 + MINUTE) },
      { from: at(T0), to: at(T0 + MINUTE), reason: '' },
    ]) {
      const answer = await w.t.http.post(path, body, token);
      expect([answer.status, answer.json.error.code]).toEqual([400, 'invalid_request']);
    }
    expect(
      (
        await w.t.http.post(
          '/v1/sensors/snr_nope/silence',
          { from: at(T0), to: at(T0 + MINUTE), reason: 'x' },
          token,
        )
      ).json.error.code,
    ).toBe('sensor_not_found');
    expect((await w.t.http.get('/v1/sensors/snr_nope/silences', token)).json.error.code).toBe(
      'sensor_not_found',
    );
    expect((await w.t.http.delete('/v1/silences/sil_nope', token)).json.error.code).toBe('silence_not_found');
    const created = await w.t.http.post(
      path,
      { from: '2026-01-05T11:00:00+01:00', to: '2026-01-05T12:30:00+01:00', reason: 'stock take' },
      token,
    );
    expect(created.status).toBe(201);
    expect(created.json).toEqual({
      id: expect.stringMatching(/^sil_/),
      sensor_id: event.sensor_id,
      from: at(T0),
      to: at(T0 + 90 * MINUTE),
      reason: 'stock take',
      created_by: w.user.userId,
      created_at: expect.any(String),
      ended_at: null,
      ended_by: null,
    });
  });
});
