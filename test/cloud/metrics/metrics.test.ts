import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createDevice, createSite, type CreatedDevice } from '../../helpers/fixtures.ts';
import { connectBridge, createBridge, publish } from '../../helpers/mqtt.ts';
import { MINUTE, rulesWorld, T0 } from '../rules/world.ts';

/** The value of one series of a Prometheus text exposition; undefined when absent. */
function series(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = (m[2] ?? '').split(',').filter(Boolean);
    if (want.length === have.length && want.every((w) => have.includes(w))) return Number(m[3]);
  }
  return undefined;
}

describe.each(DATABASES)('GET /metrics (%s)', (db) => {
  let t: TestCloud;
  let device: CreatedDevice;
  beforeAll(async () => {
    t = await startTestCloud({ db, env: { METRICS_TOKEN: 'metrics-secret-0123456789' } });
    const user = await signUp(t, 'ops@example.com');
    const site = await createSite(t, user.token);
    device = await createDevice(t, user.token, site.id, { local_id: 'probe' });
  });
  afterAll(async () => t.stop());

  it('counts requests by route template, and ingest by way in and outcome, after ingest', async () => {
    const ok = await t.http.post(
      '/v1/ingest',
      {
        device: 'probe',
        ts: '2026-01-01T00:00:00Z',
        measurements: [
          { type: 'temperature', value: 21.5 },
          { type: 'humidity', value: 40 },
          { type: 'temperature', value: 21.7, ts: '2026-01-01T00:01:00Z' },
        ],
      },
      { token: device.ingest_token },
    );
    expect(ok.status).toBe(200);
    const bad = await t.http.post(
      '/v1/ingest',
      { device: 'probe', measurements: [{ type: 'temperature', value: 1000 }] },
      { token: device.ingest_token },
    );
    expect(bad.status).toBe(422);
    // valid measurements refused (an unknown device token) count as rejected measurements too
    const refused = await t.http.post(
      '/v1/ingest',
      { device: 'probe', measurements: [{ type: 'temperature', value: 20 }] },
      { token: 'ds_live_unknown000000000000000000' },
    );
    expect(refused.status).toBe(401);
    const shelly = await t.http.get(`/v1/ingest/shelly?device=probe&temp=20.5&token=${device.ingest_token}`);
    expect(shelly.status).toBe(200);
    await t.http.get('/v1/sites/site_unknown', { token: 'ua_live_nonsense' });

    const answer = await t.http.get('/metrics');
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toContain('text/plain');
    const text = answer.text;
    expect(series(text, 'sm_ingest_measurements_total', { way: 'http', outcome: 'accepted' })).toBe(3);
    expect(series(text, 'sm_ingest_measurements_total', { way: 'http', outcome: 'rejected' })).toBe(1);
    expect(
      series(text, 'sm_ingest_rejected_requests_total', { way: 'http', code: bad.json.error.code }),
    ).toBe(1);
    expect(series(text, 'sm_ingest_rejected_requests_total', { way: 'http', code: 'token_invalid' })).toBe(1);
    expect(series(text, 'sm_ingest_measurements_total', { way: 'shelly', outcome: 'accepted' })).toBe(1);
    expect(
      series(text, 'sm_http_requests_total', { route: '/v1/ingest', method: 'POST', status: '200' }),
    ).toBe(1);
    expect(
      series(text, 'sm_http_requests_total', { route: '/v1/ingest', method: 'POST', status: '422' }),
    ).toBe(1);
    expect(
      series(text, 'sm_http_requests_total', { route: '/v1/sites/:site_id', method: 'GET', status: '401' }),
    ).toBe(1);
    expect(
      series(text, 'sm_http_request_duration_seconds_count', { route: '/v1/ingest/shelly', method: 'GET' }),
    ).toBe(1);
    // every request above that reached ingest went through a group: each group counted once, with its requests and its time
    const groups = series(text, 'sm_ingest_group_items_count') ?? 0;
    expect(groups).toBeGreaterThanOrEqual(1);
    expect(series(text, 'sm_ingest_group_items_sum')).toBeGreaterThanOrEqual(Math.max(groups, 2));
    expect(series(text, 'sm_ingest_group_seconds_count')).toBe(groups);
    expect(series(text, 'sm_ingest_group_seconds_sum')).toBeGreaterThan(0);
    // sign-up sent a mail through the job queue: its kind is listed, database-wide
    expect(series(text, 'sm_jobs_queued', { kind: 'mail' })).toBeGreaterThanOrEqual(0);
    expect(series(text, 'sm_jobs_failed', { kind: 'mail' })).toBe(0);
    expect(series(text, 'sm_mqtt_connections')).toBe(0);
    expect(series(text, 'sm_live_streams')).toBe(0);
    expect(series(text, 'sm_rule_channel_evaluations_total')).toBeGreaterThanOrEqual(0);
    expect(series(text, 'sm_alarms_opened_total')).toBe(0);
    expect(series(text, 'process_cpu_seconds_total')).toBeGreaterThan(0);
  });

  it('answers 403 outside METRICS_ALLOW, and 200 anywhere with METRICS_TOKEN', async () => {
    const far = await startTestCloud({
      db,
      env: { METRICS_ALLOW: '10.0.0.0/8', METRICS_TOKEN: 'metrics-secret-0123456789' },
    });
    try {
      const refused = await far.http.get('/metrics');
      expect([refused.status, refused.json.error.code]).toEqual([403, 'forbidden']);
      const wrong = await far.http.get('/metrics', { token: 'metrics-secret-wrong-000000' });
      expect(wrong.status).toBe(403);
      const opened = await far.http.get('/metrics', { token: 'metrics-secret-0123456789' });
      expect(opened.status).toBe(200);
      expect(opened.text).toContain('# TYPE sm_http_requests_total counter');
    } finally {
      await far.stop();
    }
  });

  it('counts channel evaluations and the alarm an excursion opens', async () => {
    const w = await rulesWorld(db);
    try {
      const scrape = async () => (await w.t.http.get('/metrics')).text;
      const before = await scrape();
      expect(series(before, 'sm_alarms_opened_total')).toBe(0);
      // food service: 0..5 °C with 30 min of grace; 9 °C for longer opens one alarm
      await w.send(T0, 9);
      await w.settle();
      await w.tickAt(T0 + 31 * MINUTE);
      await w.settle();
      expect(await w.events()).toHaveLength(1);
      const after = await scrape();
      expect(series(after, 'sm_alarms_opened_total')).toBe(1);
      expect(series(after, 'sm_rule_channel_evaluations_total')).toBeGreaterThanOrEqual(2);
      // a second scrape does not count the same evaluations again
      expect(series(await scrape(), 'sm_alarms_opened_total')).toBe(1);
    } finally {
      await w.t.stop();
    }
  });

  it('counts MQTT bridge connections and messages, and what the bridge ingests', async () => {
    const m = await startTestCloud({ db, mqtt: true });
    try {
      const user = await signUp(m, 'ops@example.com');
      const site = await createSite(m, user.token, { vertical: 'food_service' });
      const bundle = await createBridge(m, user.token, site.id);
      const scrape = async () => (await m.http.get('/metrics')).text;
      expect(series(await scrape(), 'sm_mqtt_connections')).toBe(0);
      const client = await connectBridge(m, bundle);
      try {
        const root = `service/${user.accountId}`;
        for (const value of [4.5, 4.6]) {
          const answer = await publish(client, `${root}/fridge-1`, {
            measurements: [{ type: 'temperature', value }],
          });
          expect(answer.reasonCode).toBe(0);
        }
        const text = await scrape();
        expect(series(text, 'sm_mqtt_connections')).toBe(1);
        expect(series(text, 'sm_mqtt_messages_total')).toBe(2);
        expect(series(text, 'sm_ingest_measurements_total', { way: 'mqtt', outcome: 'accepted' })).toBe(2);
      } finally {
        await client.endAsync();
      }
      await eventually(async () => series(await scrape(), 'sm_mqtt_connections') === 0, 'the gauge to fall');
    } finally {
      await m.stop();
    }
  });
});
