import { afterEach, describe, expect, it } from '@jest/globals';
import { measurementGroup } from '../../../cloud/src/storage/layout.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { auditOf } from '../../helpers/fixtures.ts';
import { at, MINUTE, rulesWorld, T0, type RulesWorld } from './world.ts';

describe.each(DATABASES)('recompute and the audit trail on %s', (db) => {
  let w: RulesWorld;
  afterEach(async () => w?.t.stop());

  /** Rows written behind the engine's back (an import, a restore): the engine never saw them. */
  async function writeUnseen(channelId: string, points: [number, number][]) {
    const { db: kdb } = w.t.cloud.services;
    const sensor = await kdb
      .selectFrom('sensors')
      .select('seq')
      .where('channel_id', '=', channelId)
      .executeTakeFirstOrThrow();
    await kdb
      .insertInto('measurements')
      .values(
        points.map(([ts, value]) => ({
          grp: measurementGroup(sensor.seq),
          sensor_seq: sensor.seq,
          ts,
          value,
        })),
      )
      .execute();
  }

  it('replays 24 hours, emits the missed event once, and a second call creates nothing', async () => {
    w = await rulesWorld(db);
    const channel = await w.send(T0, 3);
    await w.settle();
    const sensor = await w.sensor(channel);
    await writeUnseen(channel, [
      [T0 + 10 * MINUTE, 8],
      [T0 + 20 * MINUTE, 9],
      [T0 + 50 * MINUTE, 9.5],
      [T0 + 56 * MINUTE, 4],
    ]);
    w.clock.set(T0 + 58 * MINUTE);
    await w.settle();
    expect(await w.events()).toEqual([]);

    const first = await w.t.http.post(`/v1/sensors/${sensor.id}/recompute`, undefined, {
      token: w.user.token,
    });
    expect(first.status).toBe(200);
    expect(first.json).toEqual({ replayed: 5, events_created: 1, events_updated: 0, events_withdrawn: 0 });
    expect(await w.events()).toEqual([
      expect.objectContaining({
        kind: 'threshold_high',
        started_at: at(T0 + 10 * MINUTE),
        alarm_at: at(T0 + 40 * MINUTE),
        ended_at: at(T0 + 56 * MINUTE),
        peak_value: 9.5,
      }),
    ]);
    const second = await w.t.http.post(`/v1/sensors/${sensor.id}/recompute`, undefined, {
      token: w.user.token,
    });
    expect(second.json).toEqual({ replayed: 5, events_created: 0, events_updated: 0, events_withdrawn: 0 });
    expect(await w.events()).toHaveLength(1);
    const audit = await auditOf(w.t, w.user.token, 'sensor.recomputed');
    expect(audit).toHaveLength(2);
    // both at the same moment of the manual clock: order them by what they did
    audit.sort((a: any, b: any) => b.details.events_created - a.details.events_created);
    expect((audit[1] as any).details.events_created).toBe(0);
    expect(audit[0]).toMatchObject({
      by: w.user.userId,
      target: sensor.id,
      details: {
        channel_id: channel,
        replayed: 5,
        events_created: 1,
        from: at(T0 + 58 * MINUTE - 1440 * MINUTE),
      },
    });
  });

  it('answers 404 sensor_not_found for an unknown sensor', async () => {
    w = await rulesWorld(db);
    const answer = await w.t.http.post('/v1/sensors/snr_nope/recompute', undefined, { token: w.user.token });
    expect(answer.status).toBe(404);
    expect(answer.json.error.code).toBe('sensor_not_found');
  });

  it('records threshold changes, recomputes, acknowledgements and silences in the audit endpoint', async () => {
    w = await rulesWorld(db);
    const channel = await w.send(T0, 9);
    await w.tickAt(T0 + 30 * MINUTE);
    const sensor = await w.sensor(channel);
    const token = { token: w.user.token };
    await w.t.http.patch(`/v1/sensors/${sensor.id}`, { ok_max: 6 }, token);
    await w.t.http.post(`/v1/sensors/${sensor.id}/recompute`, undefined, token);
    const [event] = await w.events();
    expect(
      (await w.t.http.post(`/v1/events/${event.id}/ack`, { note: 'door left open, closed it' }, token))
        .status,
    ).toBe(200);
    const silence = await w.t.http.post(
      `/v1/sensors/${sensor.id}/silence`,
      { from: at(T0 + 30 * MINUTE), to: at(T0 + 90 * MINUTE), reason: 'defrost' },
      token,
    );
    await w.t.http.delete(`/v1/silences/${silence.json.id}`, token);
    const all = await w.t.http.get('/v1/accounts/me/audit?limit=500', token);
    const kinds = all.json.data.map((e: any) => e.kind);
    for (const kind of [
      'threshold.changed',
      'sensor.recomputed',
      'event.acknowledged',
      'silence.created',
      'silence.ended',
    ])
      expect(kinds).toContain(kind);
    expect(await auditOf(w.t, w.user.token, 'threshold.changed')).toEqual([
      expect.objectContaining({
        target: sensor.id,
        details: expect.objectContaining({
          before: expect.objectContaining({ ok_max: 5 }),
          after: expect.objectContaining({ ok_max: 6 }),
        }),
      }),
    ]);
    expect(await auditOf(w.t, w.user.token, 'event.acknowledged')).toEqual([
      expect.objectContaining({
        by: w.user.userId,
        target: event.id,
        details: expect.objectContaining({ note: 'door left open, closed it' }),
      }),
    ]);
    expect(await auditOf(w.t, w.user.token, 'silence.created')).toEqual([
      expect.objectContaining({
        target: silence.json.id,
        details: expect.objectContaining({ reason: 'defrost', sensor_id: sensor.id }),
      }),
    ]);
  });
});
