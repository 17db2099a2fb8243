import { afterEach, describe, expect, it } from '@jest/globals';
import type { SensorRow } from '../../../cloud/src/sensors/sensors.repository.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import {
  auditOf,
  createDevice,
  createSite,
  insertSensor,
  type CreatedDevice,
} from '../../helpers/fixtures.ts';

const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

describe.each(DATABASES)('sensors on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let siteId: string;
  let device: CreatedDevice;
  let sensor: SensorRow;
  afterEach(async () => t?.stop());

  /** A food-service fridge whose temperature channel ingest created with the vertical's 0..5 °C rule. */
  async function start(): Promise<void> {
    t = await startTestCloud({ db });
    user = await signUp(t, 'owner@example.com');
    siteId = (await createSite(t, user.token)).id;
    device = await createDevice(t, user.token, siteId);
    sensor = await insertSensor(t, { accountId: user.accountId, deviceId: device.id });
  }

  const patch = (body: unknown) => t.http.patch(`/v1/sensors/${sensor.id}`, body, { token: user.token });
  const get = async () => (await t.http.get(`/v1/sensors/${sensor.id}`, { token: user.token })).json;

  it("lists a device's sensors with their channel ids and rules", async () => {
    await start();
    const humidity = await insertSensor(
      t,
      { accountId: user.accountId, deviceId: device.id },
      {
        kind: 'humidity',
        label: 'probe',
        unit: '%',
        ok_min: 0,
        ok_max: 100,
        grace_min: 0,
        rule_enabled: 0,
        last_value: 41.5,
        last_ts: Date.UTC(2026, 0, 5, 10, 0, 0) * 1000 + 123456,
        state: 'silent',
      },
    );
    const answer = await t.http.get(`/v1/devices/${device.id}/sensors`, { token: user.token });
    expect(answer.status).toBe(200);
    expect(answer.json).toEqual({
      data: [
        {
          id: sensor.id,
          channel_id: sensor.channel_id,
          device_id: device.id,
          kind: 'temperature',
          label: null,
          unit: '°C',
          ok_min: 0,
          ok_max: 5,
          grace_min: 30,
          rule_enabled: true,
          no_data_min: 60,
          last_value: null,
          last_ts: null,
          state: 'no_data',
          alert_severity: null,
          created_at: expect.stringMatching(TIMESTAMP),
        },
        expect.objectContaining({
          id: humidity.id,
          channel_id: expect.stringMatching(/^chn_/),
          kind: 'humidity',
          label: 'probe',
          rule_enabled: false,
          last_value: 41.5,
          last_ts: '2026-01-05T10:00:00.123456Z',
          state: 'silent',
        }),
      ],
      next_cursor: null,
      has_more: false,
    });
  });

  it('answers an empty list for a device that has sent nothing yet', async () => {
    await start();
    const fresh = await createDevice(t, user.token, siteId);
    const answer = await t.http.get(`/v1/devices/${fresh.id}/sensors`, { token: user.token });
    expect(answer.json).toEqual({ data: [], next_cursor: null, has_more: false });
  });

  it('gets one sensor', async () => {
    await start();
    const answer = await t.http.get(`/v1/sensors/${sensor.id}`, { token: user.token });
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({ id: sensor.id, channel_id: sensor.channel_id, ok_min: 0, ok_max: 5 });
  });

  it('changes ok_min, ok_max, grace_min, rule_enabled and no_data_min, and GET shows it', async () => {
    await start();
    const answer = await patch({
      ok_min: -2.5,
      ok_max: 7,
      grace_min: 15,
      rule_enabled: false,
      no_data_min: 120,
    });
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({
      ok_min: -2.5,
      ok_max: 7,
      grace_min: 15,
      rule_enabled: false,
      no_data_min: 120,
    });
    expect(await get()).toEqual(answer.json);
  });

  it('changes one bound alone and keeps the other', async () => {
    await start();
    expect((await patch({ ok_max: 8 })).json).toMatchObject({ ok_min: 0, ok_max: 8 });
    expect((await patch({ ok_min: 8 })).json).toMatchObject({ ok_min: 8, ok_max: 8 });
  });

  it('records threshold.changed with the previous rule in details.before and the new in details.after', async () => {
    await start();
    await patch({ ok_max: 6, grace_min: 10 });
    expect(await auditOf(t, user.token, 'threshold.changed')).toEqual([
      expect.objectContaining({
        kind: 'threshold.changed',
        by: user.userId,
        target: sensor.id,
        details: expect.objectContaining({
          before: { ok_min: 0, ok_max: 5, grace_min: 30, rule_enabled: true, no_data_min: 60 },
          after: { ok_min: 0, ok_max: 6, grace_min: 10, rule_enabled: true, no_data_min: 60 },
        }),
      }),
    ]);
  });

  it.each([
    ['ok_min above ok_max', { ok_min: 10, ok_max: 2 }],
    ['ok_min alone above the stored ok_max (5)', { ok_min: 6 }],
    ['ok_max alone below the stored ok_min (0)', { ok_max: -1 }],
  ])('refuses %s with 422 invalid_range and changes nothing', async (_what, body) => {
    await start();
    const answer = await patch(body);
    expect(answer.status).toBe(422);
    expect(answer.json.error.code).toBe('invalid_range');
    expect(await get()).toMatchObject({ ok_min: 0, ok_max: 5 });
    expect(await auditOf(t, user.token, 'threshold.changed')).toEqual([]);
  });

  it('accepts a grace of 6 hours and refuses one minute more with 422 grace_too_long', async () => {
    await start();
    expect((await patch({ grace_min: 360 })).status).toBe(200);
    const answer = await patch({ grace_min: 361 });
    expect(answer.status).toBe(422);
    expect(answer.json.error.code).toBe('grace_too_long');
    expect((await get()).grace_min).toBe(360);
  });

  it.each([
    ['a negative grace_min', { grace_min: -1 }, 'grace_min'],
    ['a fractional grace_min', { grace_min: 1.5 }, 'grace_min'],
    ['a negative no_data_min', { no_data_min: -5 }, 'no_data_min'],
    ['a grace_min that is not a number', { grace_min: '30' }, 'grace_min'],
    ['ok_min null', { ok_min: null }, 'ok_min'],
    ['rule_enabled as text', { rule_enabled: 'yes' }, 'rule_enabled'],
    ['kind (immutable)', { kind: 'humidity' }, '(root)'],
    ['channel_id (immutable)', { channel_id: 'chn_other' }, '(root)'],
  ])('refuses %s with 400 invalid_request and changes nothing', async (_what, body, path) => {
    await start();
    const before = await get();
    const answer = await patch(body);
    expect(answer.status).toBe(400);
    expect(answer.json.error.code).toBe('invalid_request');
    expect(answer.json.error.details[0].path).toBe(path);
    expect(await get()).toEqual(before);
  });

  it('answers 404 sensor_not_found for an unknown sensor, and for one whose device was deleted', async () => {
    await start();
    for (const answer of [
      await t.http.get('/v1/sensors/snr_unknown', { token: user.token }),
      await t.http.patch('/v1/sensors/snr_unknown', { ok_max: 3 }, { token: user.token }),
    ]) {
      expect(answer.status).toBe(404);
      expect(answer.json.error.code).toBe('sensor_not_found');
    }
    expect((await t.http.delete(`/v1/devices/${device.id}`, { token: user.token })).status).toBe(204);
    const gone = await t.http.get(`/v1/sensors/${sensor.id}`, { token: user.token });
    expect(gone.status).toBe(404);
    expect(gone.json.error.code).toBe('sensor_not_found');
    const listed = await t.http.get(`/v1/devices/${device.id}/sensors`, { token: user.token });
    expect(listed.status).toBe(404);
    expect(listed.json.error.code).toBe('device_not_found');
  });

  it("answers 404 sensor_not_found for another account's sensor, even with an invalid body", async () => {
    await start();
    const other = await signUp(t, 'other@example.com');
    for (const body of [{ ok_max: 3 }, { kind: 'humidity' }, { ok_min: 9 }]) {
      const answer = await t.http.patch(`/v1/sensors/${sensor.id}`, body, { token: other.token });
      expect(answer.status).toBe(404);
      expect(answer.json.error.code).toBe('sensor_not_found');
    }
    expect(await get()).toMatchObject({ ok_min: 0, ok_max: 5 });
  });
});
