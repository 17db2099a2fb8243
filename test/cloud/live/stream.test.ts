import { afterEach, describe, expect, it } from '@jest/globals';
import { MAX_STREAMS_PER_ACCOUNT } from '../../../cloud/src/live/live.stream.ts';
import { signUp, type SignedIn } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createDevice, createSite } from '../../helpers/fixtures.ts';
import { SseClient } from '../../helpers/sse.ts';
import { MINUTE, rulesWorld, T0, type RulesWorld } from '../rules/world.ts';

const DAY = 24 * 60 * MINUTE;
const XHR = { 'x-requested-with': 'XMLHttpRequest' };

/**
 * `GET /app/api/stream`: the signed-in account's changes as Server-Sent Events, through the real
 * ingest route and rule engine, to the right account only, ended with the session.
 */
describe.each(DATABASES)('the dashboard stream on %s', (db) => {
  let w: RulesWorld;
  const streams: SseClient[] = [];
  afterEach(async () => {
    for (const s of streams) s.close();
    streams.length = 0;
    await w?.t.stop();
  });

  async function stream(user: SignedIn, headers: Record<string, string> = {}): Promise<SseClient> {
    const s = await SseClient.open(`${w.t.url}/app/api/stream`, {
      cookie: `os_session=${user.cookie}`,
      ...headers,
    });
    streams.push(s);
    return s;
  }

  it('sends a device as GET /v1/devices/{id} answers it, what its owner publishes on the map included', async () => {
    w = await rulesWorld(db);
    const mine = await stream(w.user);
    await mine.waitFor('ready');
    const shared = await w.t.http.patch(
      `/v1/devices/${w.device.id}`,
      { public: { enabled: true, nickname: 'Roof', location_name: 'Berlin', lat: 52.5, lon: 13.4 } },
      { token: w.user.token },
    );
    expect(shared.status).toBe(200);
    await w.send(T0, 3);
    const online = await mine.waitFor('device', (d) => d.online === true);
    expect(online.data.public).toMatchObject({ enabled: true, nickname: 'Roof', location_name: 'Berlin' });
    expect(online.data).toEqual(
      (await w.t.http.get(`/v1/devices/${w.device.id}`, { token: w.user.token })).json,
    );
  });

  it('delivers a sensor change after POST /v1/ingest and an alarm opening, to the account only', async () => {
    w = await rulesWorld(db);
    const other = await signUp(w.t, 'other@example.com');
    const mine = await stream(w.user);
    const theirs = await stream(other);
    expect(mine.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(mine.headers.get('cache-control')).toBe('no-store');
    // opening the stream is a request like any other: the session rolls forward, the cookie comes again
    expect(mine.headers.getSetCookie()[0]).toMatch(/^os_session=[^;]+; Path=\/; Max-Age=\d+; HttpOnly/);
    expect((await mine.waitFor('ready')).data).toEqual({
      account_id: w.user.accountId,
      user_id: w.user.userId,
      heartbeat_ms: 25_000,
    });
    await theirs.waitFor('ready');

    // a reading in range (0..5 °C): the sensor's value and state arrive without any request
    const channelId = await w.send(T0, 3);
    const first = await mine.waitFor('sensor', (s) => s.last_value === 3 && s.state === 'ok');
    const sensor = await w.sensor(channelId);
    expect(first.data).toEqual(sensor);
    // its device came online with that first reading
    const online = await mine.waitFor('device', (d) => d.online === true);
    expect(online.data).toEqual(
      (await w.t.http.get(`/v1/devices/${w.device.id}`, { token: w.user.token })).json,
    );

    // out of range: grace, then after grace_min (30 min) the alarm opens
    w.clock.set(T0 + MINUTE);
    await w.send(T0 + MINUTE, 9);
    await mine.waitFor('sensor', (s) => s.last_value === 9 && s.state === 'grace');
    await w.tickAt(T0 + 31 * MINUTE);
    const opened = await mine.waitFor('alarm.opened');
    const [event] = await w.events();
    expect(opened.data).toEqual(event);
    expect(opened.data).toMatchObject({ kind: 'threshold_high', state: 'open', sensor_id: sensor.id });
    await mine.waitFor('sensor', (s) => s.id === sensor.id && s.state === 'alarm');

    // acknowledged from the dashboard, then resolved by a reading back in range
    const ack = await w.t.http.post(
      `/app/api/events/${event.id}/ack`,
      { note: 'door closed' },
      { cookie: `os_session=${w.user.cookie}`, headers: XHR },
    );
    expect(ack.status).toBe(200);
    expect((await mine.waitFor('alarm.acknowledged')).data).toEqual(ack.json);
    w.clock.set(T0 + 40 * MINUTE);
    await w.send(T0 + 40 * MINUTE, 4);
    await w.settle();
    const resolved = await mine.waitFor('alarm.resolved');
    expect(resolved.data).toMatchObject({ id: event.id, state: 'resolved', ack_note: 'door closed' });
    await mine.waitFor('sensor', (s) => s.last_value === 4 && s.state === 'ok');

    // the other account heard nothing of it; its own device's reading reaches it alone
    expect(theirs.events.map((e) => e.event)).toEqual(['ready']);
    const site = await createSite(w.t, other.token);
    const device = await createDevice(w.t, other.token, site.id, { local_id: 'their-fridge' });
    await w.send(T0 + 41 * MINUTE, 2, 'temperature', device);
    await theirs.waitFor('sensor', (s) => s.last_value === 2);
    await w.settle();
    expect(mine.events.filter((e) => e.event === 'sensor').map((e) => e.data.device_id)).not.toContain(
      device.id,
    );
    expect(JSON.stringify(theirs.events)).not.toContain(w.user.accountId);
    expect(JSON.stringify(theirs.events)).not.toContain(sensor.id);
  });

  it('delivers a threshold change made elsewhere, though the state stays the same', async () => {
    w = await rulesWorld(db);
    const mine = await stream(w.user);
    await mine.waitFor('ready');
    const channelId = await w.send(T0, 3);
    await mine.waitFor('sensor', (s) => s.last_value === 3 && s.state === 'ok');
    const sensor = await w.sensor(channelId);
    const patched = await w.t.http.patch(`/v1/sensors/${sensor.id}`, { ok_max: 6 }, { token: w.user.token });
    expect(patched.status).toBe(200);
    const changed = await mine.waitFor('sensor', (s) => s.id === sensor.id && s.ok_max === 6);
    expect(changed.data).toMatchObject({ state: 'ok', ok_max: 6 });
  });

  it('closes the stream when a change cannot be read, so the browser reconnects and reloads', async () => {
    w = await rulesWorld(db);
    const mine = await stream(w.user);
    await mine.waitFor('ready');
    const { sensors } = w.t.cloud.services;
    const getMany = sensors.getMany.bind(sensors);
    let failures = 1;
    sensors.getMany = (...args) =>
      failures-- > 0 ? Promise.reject(new Error('connection terminated unexpectedly')) : getMany(...args);
    await w.send(T0, 3);
    await mine.whenEnded();
    expect(mine.events.map((e) => e.event)).not.toContain('sensor');
    const again = await stream(w.user);
    await again.waitFor('ready');
    await w.send(T0 + MINUTE, 4);
    await again.waitFor('sensor', (s) => s.last_value === 4);
  });

  it('ends the stream when the session signs out, signs out everywhere, or expires', async () => {
    w = await rulesWorld(db, { env: { SESSION_MAX_DAYS: '365' } });
    const cookie = `os_session=${w.user.cookie}`;
    const one = await stream(w.user);
    await one.waitFor('ready');
    expect((await w.t.http.post('/app/api/auth/logout', undefined, { cookie, headers: XHR })).status).toBe(
      204,
    );
    await one.waitFor('signed_out');
    await one.whenEnded();

    const again = await signUp(w.t, w.user.email);
    const second = await signUp(w.t, w.user.email);
    const [a, b] = [await stream(again), await stream(second)];
    await a.waitFor('ready');
    await b.waitFor('ready');
    const everywhere = await w.t.http.post('/app/api/auth/logout-all', undefined, {
      cookie: `os_session=${again.cookie}`,
      headers: XHR,
    });
    expect(everywhere.status).toBe(204);
    for (const s of [a, b]) {
      await s.waitFor('signed_out');
      await s.whenEnded();
    }

    // expiry: 30 idle days, seen at the next heartbeat (run here instead of waiting 25 s)
    const late = await signUp(w.t, w.user.email);
    const idle = await stream(late);
    await idle.waitFor('ready');
    await w.t.cloud.services.liveStreams.checkSessions();
    await idle.waitFor('heartbeat');
    expect(idle.ended).toBe(false);
    w.clock.set(w.clock.nowMicros() + 31 * DAY);
    await w.t.cloud.services.liveStreams.checkSessions();
    await idle.waitFor('signed_out');
    await idle.whenEnded();
    await eventually(() => w.t.cloud.services.liveStreams.count() === 0, 'no stream left');
  });

  it('needs the session cookie, and bounds the streams of one account', async () => {
    w = await rulesWorld(db);
    const noCookie = await SseClient.open(`${w.t.url}/app/api/stream`, {});
    expect([noCookie.status, JSON.parse(noCookie.text).error.code]).toEqual([401, 'auth_required']);
    const bearer = await SseClient.open(`${w.t.url}/app/api/stream`, {
      authorization: `Bearer ${w.user.token}`,
    });
    expect([bearer.status, JSON.parse(bearer.text).error.code]).toEqual([401, 'auth_required']);

    const open: SseClient[] = [];
    for (let i = 0; i < MAX_STREAMS_PER_ACCOUNT; i++) open.push(await stream(w.user));
    for (const s of open) await s.waitFor('ready');
    const refused = await stream(w.user);
    expect([refused.status, JSON.parse(refused.text).error.code]).toEqual([429, 'rate_limited']);
    expect(refused.headers.get('retry-after')).toBe('25');
    open[0]!.close();
    await eventually(
      () => w.t.cloud.services.liveStreams.count(w.user.accountId) < MAX_STREAMS_PER_ACCOUNT,
      'a stream closed by its client is forgotten',
    );
    expect((await stream(w.user)).status).toBe(200);
    // stopping the cloud ends the streams still open (afterEach would hang otherwise)
  });

  it('bounds the streams of all accounts together (LIVE_MAX_STREAMS): past it 503, the process is full', async () => {
    w = await rulesWorld(db, { env: { LIVE_MAX_STREAMS: '3' } });
    const others = [await signUp(w.t, 'b@example.com'), await signUp(w.t, 'c@example.com')];
    const open = [await stream(w.user), await stream(others[0]!), await stream(others[1]!)];
    for (const s of open) await s.waitFor('ready');
    const late = await signUp(w.t, 'late@example.com');
    const refused = await stream(late);
    expect([refused.status, JSON.parse(refused.text).error.code]).toEqual([503, 'overloaded']);
    expect(refused.headers.get('retry-after')).toBe('25');
    open[1]!.close();
    await eventually(() => w.t.cloud.services.liveStreams.count() < 3, 'a closed stream to be forgotten');
    const admitted = await stream(late);
    expect(admitted.status).toBe(200);
    await admitted.waitFor('ready');
  });
});
