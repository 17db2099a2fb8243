import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { RouteDef } from '../../../cloud/src/http/route-table.ts';
import type { SensorRow } from '../../../cloud/src/sensors/sensors.repository.ts';
import { newId } from '../../../shared/ids.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { alarmEventRow, createDevice, createSite, insertSensor } from '../../helpers/fixtures.ts';
import { HttpClient, type Answer, type CallOptions } from '../../helpers/http.ts';

/** Account A with one of everything, and account B, an admin of another account. */
interface World {
  t: TestCloud;
  a: SignedIn & {
    siteId: string;
    deviceId: string;
    deviceToken: string;
    sensorId: string;
    /** The channel of A's sensor (measurement reads). */
    channelId: string;
    tokenId: string;
    /** A's alarm event, silence window and outbound webhook (rule engine routes). */
    eventId: string;
    silenceId: string;
    webhookId: string;
    /** A's MQTT bridge. */
    bridgeId: string;
    /** A's report. */
    reportId: string;
    /** A's report schedule. */
    scheduleId: string;
    /** A's inbound integration and its `whk_` token. */
    integrationId: string;
    integrationToken: string;
    /** A's alert rule (on A's channel). */
    alertRuleId: string;
  };
  b: SignedIn;
}

interface RouteProbe {
  /** Calls the route naming A's resources wherever it takes one, with the given credentials. */
  call(w: World, auth: CallOptions): Promise<Answer>;
  /** What B's admin token gets: A's resource is not found, or B sees and changes only its own. */
  asOutsider(answer: Answer, w: World): Promise<void> | void;
}

function notFound(code: string): (answer: Answer) => void {
  return (answer) => {
    expect({ status: answer.status, code: answer.json?.error?.code }).toEqual({ status: 404, code });
  };
}

/** B gets an answer about its own account only: nothing of A's appears in it. */
function ownOnly(status: number): (answer: Answer, w: World) => void {
  return (answer, w) => {
    expect(answer.status).toBe(status);
    for (const id of [w.a.accountId, w.a.userId, w.a.siteId, w.a.deviceId, w.a.sensorId, w.a.tokenId])
      expect(answer.text).not.toContain(id);
  };
}

/**
 * How to call every management route against A's resources. The test below fails when the route
 * table has a user route that is not here, so a new route cannot escape the isolation check.
 */
const PROBES: Record<string, RouteProbe> = {
  'POST /v1/tokens': {
    call: ({ t }, auth) => t.http.post('/v1/tokens', { label: 'b', scope: 'read' }, auth),
    asOutsider: ownOnly(201),
  },
  'GET /v1/tokens': { call: ({ t }, auth) => t.http.get('/v1/tokens', auth), asOutsider: ownOnly(200) },
  'DELETE /v1/tokens/:token_id': {
    call: ({ t, a }, auth) => t.http.delete(`/v1/tokens/${a.tokenId}`, auth),
    asOutsider: notFound('token_not_found'),
  },
  'GET /v1/accounts/me': {
    call: ({ t }, auth) => t.http.get('/v1/accounts/me', auth),
    asOutsider: (answer, w) => {
      ownOnly(200)(answer, w);
      expect(answer.json.id).toBe(w.b.accountId);
    },
  },
  'GET /v1/accounts/me/audit': {
    call: ({ t }, auth) => t.http.get('/v1/accounts/me/audit', auth),
    asOutsider: ownOnly(200),
  },
  'GET /v1/audit/verify': {
    call: ({ t }, auth) => t.http.get('/v1/audit/verify', auth),
    asOutsider: (answer, w) => {
      ownOnly(200)(answer, w);
      expect(answer.json.ok).toBe(true);
    },
  },
  'GET /v1/sites': { call: ({ t }, auth) => t.http.get('/v1/sites', auth), asOutsider: ownOnly(200) },
  'POST /v1/sites': {
    call: ({ t }, auth) => t.http.post('/v1/sites', { name: 'B site', vertical: 'generic' }, auth),
    asOutsider: ownOnly(201),
  },
  'GET /v1/sites/:site_id': {
    call: ({ t, a }, auth) => t.http.get(`/v1/sites/${a.siteId}`, auth),
    asOutsider: notFound('site_not_found'),
  },
  'PATCH /v1/sites/:site_id': {
    call: ({ t, a }, auth) => t.http.patch(`/v1/sites/${a.siteId}`, { name: 'taken over' }, auth),
    asOutsider: notFound('site_not_found'),
  },
  'DELETE /v1/sites/:site_id': {
    call: ({ t, a }, auth) => t.http.delete(`/v1/sites/${a.siteId}`, auth),
    asOutsider: notFound('site_not_found'),
  },
  'GET /v1/models': { call: ({ t }, auth) => t.http.get('/v1/models', auth), asOutsider: ownOnly(200) },
  'GET /v1/devices': {
    call: ({ t, a }, auth) => t.http.get(`/v1/devices?site_id=${a.siteId}`, auth),
    asOutsider: async (answer, { t, a, b }) => {
      notFound('site_not_found')(answer);
      notFound('account_not_found')(
        await t.http.get(`/v1/devices?account_id=${a.accountId}`, { token: b.token }),
      );
      const own = await t.http.get('/v1/devices?account_id=me', { token: b.token });
      expect(own.json.data).toEqual([]);
    },
  },
  'POST /v1/devices': {
    call: ({ t, a }, auth) =>
      t.http.post(
        '/v1/devices',
        { site_id: a.siteId, local_id: 'intruder', name: 'x', model: 'http-generic' },
        auth,
      ),
    asOutsider: notFound('site_not_found'),
  },
  'GET /v1/devices/:device_id': {
    call: ({ t, a }, auth) => t.http.get(`/v1/devices/${a.deviceId}`, auth),
    asOutsider: notFound('device_not_found'),
  },
  'PATCH /v1/devices/:device_id': {
    call: ({ t, a }, auth) => t.http.patch(`/v1/devices/${a.deviceId}`, { name: 'taken over' }, auth),
    asOutsider: notFound('device_not_found'),
  },
  'DELETE /v1/devices/:device_id': {
    call: ({ t, a }, auth) => t.http.delete(`/v1/devices/${a.deviceId}`, auth),
    asOutsider: notFound('device_not_found'),
  },
  'POST /v1/devices/:device_id/rotate-token': {
    call: ({ t, a }, auth) => t.http.post(`/v1/devices/${a.deviceId}/rotate-token`, undefined, auth),
    asOutsider: notFound('device_not_found'),
  },
  'POST /v1/devices/:device_id/identify': {
    call: ({ t, a }, auth) => t.http.post(`/v1/devices/${a.deviceId}/identify`, undefined, auth),
    asOutsider: notFound('device_not_found'),
  },
  'POST /v1/bridges': {
    call: ({ t, a }, auth) => t.http.post('/v1/bridges', { site_id: a.siteId, name: 'intruder' }, auth),
    asOutsider: notFound('site_not_found'),
  },
  'GET /v1/bridges': {
    call: ({ t }, auth) => t.http.get('/v1/bridges', auth),
    asOutsider: (answer, w) => {
      ownOnly(200)(answer, w);
      expect(answer.text).not.toContain(w.a.bridgeId);
    },
  },
  'GET /v1/bridges/:bridge_id': {
    call: ({ t, a }, auth) => t.http.get(`/v1/bridges/${a.bridgeId}`, auth),
    asOutsider: notFound('bridge_not_found'),
  },
  'DELETE /v1/bridges/:bridge_id': {
    call: ({ t, a }, auth) => t.http.delete(`/v1/bridges/${a.bridgeId}`, auth),
    asOutsider: notFound('bridge_not_found'),
  },
  'POST /v1/devices/:device_id/move': {
    call: ({ t, a }, auth) =>
      t.http.post(
        `/v1/devices/${a.deviceId}/move`,
        { to_site_id: a.siteId, effective_at: '2026-01-05T10:00:00Z' },
        auth,
      ),
    asOutsider: notFound('device_not_found'),
  },
  'GET /v1/channels/:channel_id/measurements': {
    call: ({ t, a }, auth) => t.http.get(`/v1/channels/${a.channelId}/measurements`, auth),
    asOutsider: notFound('channel_not_found'),
  },
  'GET /v1/measurements': {
    call: ({ t, a }, auth) => t.http.get(`/v1/measurements?channel_ids=${a.channelId}`, auth),
    asOutsider: notFound('channel_not_found'),
  },
  'POST /v1/accounts/me/export': {
    call: ({ t }, auth) => t.http.post('/v1/accounts/me/export', undefined, auth),
    asOutsider: ownOnly(200),
  },
  'GET /v1/devices/:device_id/sensors': {
    call: ({ t, a }, auth) => t.http.get(`/v1/devices/${a.deviceId}/sensors`, auth),
    asOutsider: notFound('device_not_found'),
  },
  'GET /v1/sensors/:sensor_id': {
    call: ({ t, a }, auth) => t.http.get(`/v1/sensors/${a.sensorId}`, auth),
    asOutsider: notFound('sensor_not_found'),
  },
  'PATCH /v1/sensors/:sensor_id': {
    call: ({ t, a }, auth) => t.http.patch(`/v1/sensors/${a.sensorId}`, { ok_max: 99 }, auth),
    asOutsider: notFound('sensor_not_found'),
  },
  'POST /v1/sensors/:sensor_id/silence': {
    call: ({ t, a }, auth) =>
      t.http.post(
        `/v1/sensors/${a.sensorId}/silence`,
        { from: '2026-01-05T10:00:00Z', to: '2026-01-05T11:00:00Z', reason: 'taken over' },
        auth,
      ),
    asOutsider: notFound('sensor_not_found'),
  },
  'GET /v1/sensors/:sensor_id/silences': {
    call: ({ t, a }, auth) => t.http.get(`/v1/sensors/${a.sensorId}/silences`, auth),
    asOutsider: notFound('sensor_not_found'),
  },
  'DELETE /v1/silences/:silence_id': {
    call: ({ t, a }, auth) => t.http.delete(`/v1/silences/${a.silenceId}`, auth),
    asOutsider: notFound('silence_not_found'),
  },
  'POST /v1/sensors/:sensor_id/recompute': {
    call: ({ t, a }, auth) => t.http.post(`/v1/sensors/${a.sensorId}/recompute`, undefined, auth),
    asOutsider: notFound('sensor_not_found'),
  },
  'GET /v1/events': {
    call: ({ t, a }, auth) => t.http.get(`/v1/events?sensor_id=${a.sensorId}`, auth),
    asOutsider: async (answer, { t, b }) => {
      notFound('sensor_not_found')(answer);
      expect((await t.http.get('/v1/events', { token: b.token })).json.data).toEqual([]);
    },
  },
  'GET /v1/events/:event_id': {
    call: ({ t, a }, auth) => t.http.get(`/v1/events/${a.eventId}`, auth),
    asOutsider: notFound('event_not_found'),
  },
  'POST /v1/events/:event_id/ack': {
    call: ({ t, a }, auth) => t.http.post(`/v1/events/${a.eventId}/ack`, { note: 'not mine' }, auth),
    asOutsider: notFound('event_not_found'),
  },
  'POST /v1/webhooks': {
    // B registers its own (refused: this test's cloud may not reach the host), never A's
    call: ({ t }, auth) =>
      t.http.post('/v1/webhooks', { url: 'http://10.0.0.1/b', events: ['alarm.opened'] }, auth),
    asOutsider: ownOnly(422),
  },
  'GET /v1/webhooks': { call: ({ t }, auth) => t.http.get('/v1/webhooks', auth), asOutsider: ownOnly(200) },
  'DELETE /v1/webhooks/:webhook_id': {
    call: ({ t, a }, auth) => t.http.delete(`/v1/webhooks/${a.webhookId}`, auth),
    asOutsider: notFound('webhook_not_found'),
  },
  'GET /v1/webhooks/:webhook_id/deliveries': {
    call: ({ t, a }, auth) => t.http.get(`/v1/webhooks/${a.webhookId}/deliveries`, auth),
    asOutsider: notFound('webhook_not_found'),
  },
  'POST /v1/reports': {
    call: ({ t, a }, auth) =>
      t.http.post(
        '/v1/reports',
        {
          site_id: a.siteId,
          template: 'haccp_monthly',
          language: 'en',
          period: { from: '2026-01-01T00:00:00Z', to: '2026-02-01T00:00:00Z' },
        },
        auth,
      ),
    asOutsider: notFound('site_not_found'),
  },
  'GET /v1/reports': {
    call: ({ t, a }, auth) => t.http.get(`/v1/reports?site_id=${a.siteId}`, auth),
    asOutsider: async (answer, w) => {
      notFound('site_not_found')(answer);
      const own = await w.t.http.get('/v1/reports', { token: w.b.token });
      ownOnly(200)(own, w);
      expect(own.json.data).toEqual([]);
    },
  },
  'GET /v1/reports/:report_id': {
    call: ({ t, a }, auth) => t.http.get(`/v1/reports/${a.reportId}`, auth),
    asOutsider: notFound('report_not_found'),
  },
  'GET /v1/reports/:report_id/file': {
    call: ({ t, a }, auth) => t.http.get(`/v1/reports/${a.reportId}/file`, auth),
    asOutsider: notFound('report_not_found'),
  },
  'POST /v1/report-schedules': {
    call: ({ t, a }, auth) =>
      t.http.post(
        '/v1/report-schedules',
        {
          site_id: a.siteId,
          template: 'haccp_monthly',
          language: 'en',
          every: 'month',
          recipients: ['b@example.com'],
        },
        auth,
      ),
    asOutsider: notFound('site_not_found'),
  },
  'GET /v1/report-schedules': {
    call: ({ t }, auth) => t.http.get('/v1/report-schedules', auth),
    asOutsider: (answer, w) => {
      ownOnly(200)(answer, w);
      expect(answer.text).not.toContain(w.a.scheduleId);
      expect(answer.json.data).toEqual([]);
    },
  },
  'GET /v1/report-schedules/:schedule_id': {
    call: ({ t, a }, auth) => t.http.get(`/v1/report-schedules/${a.scheduleId}`, auth),
    asOutsider: notFound('report_schedule_not_found'),
  },
  'DELETE /v1/report-schedules/:schedule_id': {
    call: ({ t, a }, auth) => t.http.delete(`/v1/report-schedules/${a.scheduleId}`, auth),
    asOutsider: notFound('report_schedule_not_found'),
  },
  'POST /v1/integrations': {
    call: ({ t, a }, auth) =>
      t.http.post('/v1/integrations', { kind: 'chirpstack', site_id: a.siteId, name: 'intruder' }, auth),
    asOutsider: notFound('site_not_found'),
  },
  'GET /v1/integrations': {
    call: ({ t }, auth) => t.http.get('/v1/integrations', auth),
    asOutsider: (answer, w) => {
      ownOnly(200)(answer, w);
      expect(answer.text).not.toContain(w.a.integrationId);
    },
  },
  'GET /v1/integrations/:integration_id': {
    call: ({ t, a }, auth) => t.http.get(`/v1/integrations/${a.integrationId}`, auth),
    asOutsider: notFound('integration_not_found'),
  },
  'DELETE /v1/integrations/:integration_id': {
    call: ({ t, a }, auth) => t.http.delete(`/v1/integrations/${a.integrationId}`, auth),
    asOutsider: notFound('integration_not_found'),
  },
  'POST /v1/integrations/:integration_id/rotate-token': {
    call: ({ t, a }, auth) =>
      t.http.post(`/v1/integrations/${a.integrationId}/rotate-token`, undefined, auth),
    asOutsider: notFound('integration_not_found'),
  },
  'POST /v1/alert-rules': {
    call: ({ t, a }, auth) =>
      t.http.post(
        '/v1/alert-rules',
        {
          name: 'x',
          channel_ids: [a.channelId],
          conditions: [{ type: 'above', value: 8, severity: 'warning' }],
        },
        auth,
      ),
    asOutsider: notFound('channel_not_found'),
  },
  'GET /v1/alert-rules': {
    call: ({ t }, auth) => t.http.get('/v1/alert-rules', auth),
    asOutsider: (answer, w) => {
      ownOnly(200)(answer, w);
      expect(answer.text).not.toContain(w.a.alertRuleId);
      expect(answer.json.data).toEqual([]);
    },
  },
  'GET /v1/alert-rules/:rule_id': {
    call: ({ t, a }, auth) => t.http.get(`/v1/alert-rules/${a.alertRuleId}`, auth),
    asOutsider: notFound('alert_rule_not_found'),
  },
  'PATCH /v1/alert-rules/:rule_id': {
    call: ({ t, a }, auth) => t.http.patch(`/v1/alert-rules/${a.alertRuleId}`, { name: 'mine now' }, auth),
    asOutsider: notFound('alert_rule_not_found'),
  },
  'DELETE /v1/alert-rules/:rule_id': {
    call: ({ t, a }, auth) => t.http.delete(`/v1/alert-rules/${a.alertRuleId}`, auth),
    asOutsider: notFound('alert_rule_not_found'),
  },
};

/** An alarm event and a webhook of A, written as the engine and registration would (no network needed). */
async function alarmAndWebhookOf(t: TestCloud, accountId: string, userId: string, sensor: SensorRow) {
  const { db, webhooksRepository } = t.cloud.services;
  const now = Date.UTC(2026, 0, 5, 10, 0, 0) * 1000;
  const eventId = newId('evt');
  await db
    .insertInto('alarm_events')
    .values(
      alarmEventRow(
        {
          accountId,
          siteId: 'site_of_a',
          deviceId: sensor.device_id,
          sensor,
          channelId: sensor.channel_id,
        },
        eventId,
        now,
        { alarm_at: now, notified_open_at: now },
      ),
    )
    .execute();
  const webhookId = newId('wh');
  await webhooksRepository.insert(db, {
    id: webhookId,
    account_id: accountId,
    url: 'https://hooks.example.com/a',
    events: JSON.stringify(['alarm.opened']),
    secret: 'whsec_a',
    created_by: userId,
    created_at: now,
    deleted_at: null,
  });
  return { eventId, webhookId };
}

const routeKey = (route: RouteDef) => `${route.method.toUpperCase()} ${route.path}`;
const isUserRoute = (route: RouteDef) => route.auth === 'user' || route.auth === 'user-or-session';

/** The `/v1` route a dashboard route is served from, as PROBES names it. */
const v1Key = (route: RouteDef) => `${route.method.toUpperCase()} /v1${route.path.slice('/app/api'.length)}`;

/**
 * Dashboard routes with no resource of A to reach: sign-in and sign-out act on the caller's own
 * session, and the stream's isolation is tested with live changes (test/cloud/live/stream.test.ts).
 */
const DASHBOARD_OWN_SESSION_ONLY = [
  'POST /app/api/auth/request',
  'POST /app/api/auth/verify',
  'POST /app/api/auth/logout',
  'POST /app/api/auth/logout-all',
  'GET /app/api/stream',
];

/**
 * A client that sends every `/v1` call of a probe to `/app/api` as the dashboard does: the session
 * cookie (whatever the probe asks for) and `X-Requested-With`.
 */
class DashboardClient extends HttpClient {
  constructor(
    baseUrl: string,
    private readonly cookie: string,
  ) {
    super(baseUrl);
  }

  override call(method: string, path: string, body?: unknown, options: CallOptions = {}): Promise<Answer> {
    const { token: _ignored, ...rest } = options;
    return super.call(method, path.replace(/^\/v1\//, '/app/api/'), body, {
      ...rest,
      cookie: this.cookie,
      headers: { ...rest.headers, 'x-requested-with': 'XMLHttpRequest' },
    });
  }
}

describe.each(DATABASES)('isolation between accounts on %s', (db) => {
  let w: World;
  let routes: RouteDef[];
  /** A's resources as A saw them before B tried anything. */
  let before: Record<string, unknown>;

  async function snapshotOfA(): Promise<Record<string, unknown>> {
    const { t, a } = w;
    const get = async (path: string) => (await t.http.get(path, { token: a.token })).json;
    return {
      site: await get(`/v1/sites/${a.siteId}`),
      device: await get(`/v1/devices/${a.deviceId}`),
      sensor: await get(`/v1/sensors/${a.sensorId}`),
      tokens: (await get('/v1/tokens')).data.map((r: { id: string; label: string }) => [r.id, r.label]),
      sites: (await get('/v1/sites')).data.length,
      devices: (await get('/v1/devices?account_id=me')).data.length,
      bridges: (await get('/v1/bridges')).data.map((r: { id: string }) => r.id),
      reports: (await get('/v1/reports')).data.map((r: { id: string }) => r.id),
      reportSchedules: (await get('/v1/report-schedules')).data,
      integrations: (await get('/v1/integrations')).data,
      alertRules: (await get('/v1/alert-rules')).data,
    };
  }

  beforeAll(async () => {
    const t = await startTestCloud({ db });
    const a = await signUp(t, 'a@example.com');
    const siteId = (await createSite(t, a.token)).id;
    const device = await createDevice(t, a.token, siteId);
    const sensor = await insertSensor(t, { accountId: a.accountId, deviceId: device.id });
    const token = await t.http.post('/v1/tokens', { label: 'a read', scope: 'read' }, { token: a.token });
    const silence = await t.http.post(
      `/v1/sensors/${sensor.id}/silence`,
      { from: '2026-01-05T10:00:00Z', to: '2026-01-05T11:00:00Z', reason: 'defrost' },
      { token: a.token },
    );
    const { eventId, webhookId } = await alarmAndWebhookOf(t, a.accountId, a.userId, sensor);
    const bridge = await t.http.post(
      '/v1/bridges',
      { site_id: siteId, name: 'a broker' },
      { token: a.token },
    );
    const report = await t.http.post(
      '/v1/reports',
      {
        site_id: siteId,
        template: 'haccp_monthly',
        language: 'en',
        period: { from: '2026-01-01T00:00:00Z', to: '2026-02-01T00:00:00Z' },
      },
      { token: a.token },
    );
    const schedule = await t.http.post(
      '/v1/report-schedules',
      { site_id: siteId, template: 'haccp_monthly', language: 'en', every: 'week', recipients: [a.email] },
      { token: a.token },
    );
    const integration = await t.http.post(
      '/v1/integrations',
      { kind: 'chirpstack', site_id: siteId, name: 'a network server' },
      { token: a.token },
    );
    const alertRule = await t.http.post(
      '/v1/alert-rules',
      {
        name: 'a rule',
        channel_ids: [sensor.channel_id],
        conditions: [{ type: 'above', value: 8, severity: 'warning' }],
      },
      { token: a.token },
    );
    w = {
      t,
      a: {
        ...a,
        siteId,
        deviceId: device.id,
        deviceToken: device.ingest_token,
        sensorId: sensor.id,
        channelId: sensor.channel_id,
        tokenId: token.json.id,
        eventId,
        silenceId: silence.json.id,
        webhookId,
        bridgeId: bridge.json.id,
        reportId: report.json.id,
        scheduleId: schedule.json.id,
        integrationId: integration.json.id,
        integrationToken: integration.json.token,
        alertRuleId: alertRule.json.id,
      },
      b: await signUp(t, 'b@example.com'),
    };
    routes = t.cloud.routes.filter(isUserRoute);
    before = await snapshotOfA();
  });
  afterAll(async () => w?.t.stop());

  it('has a probe for every management route in the route table, and none for a route that is gone', () => {
    const keys = routes.map(routeKey);
    expect(keys.filter((k) => !(k in PROBES))).toEqual([]);
    expect(Object.keys(PROBES).filter((k) => !keys.includes(k))).toEqual([]);
  });

  it("answers B's admin token on every route with 404 for A's resources, or with B's own data only", async () => {
    for (const route of routes) {
      const probe = PROBES[routeKey(route)];
      if (!probe) continue; // reported by the test above
      const answer = await probe.call(w, { token: w.b.token });
      try {
        await probe.asOutsider(answer, w);
      } catch (err) {
        throw new Error(`${routeKey(route)} as B: ${answer.status} ${answer.text}\n${String(err)}`, {
          cause: err,
        });
      }
    }
    // nothing of A changed, A's tokens still work, and A's audit trail shows nobody from B
    expect(await snapshotOfA()).toEqual(before);
    const device = await w.t.cloud.services.authenticator.device(w.a.deviceToken);
    expect(device.deviceId).toBe(w.a.deviceId);
    const audit = await w.t.http.get('/v1/accounts/me/audit', { token: w.a.token });
    expect(audit.json.data.filter((e: { by: string }) => e.by !== w.a.userId)).toEqual([]);
  });

  it('has a probe for every /app/api route, the one of the /v1 route it is served from', () => {
    const dashboard = w.t.cloud.dashboardRoutes.map(routeKey);
    const probed = w.t.cloud.dashboardRoutes.filter((r) => !DASHBOARD_OWN_SESSION_ONLY.includes(routeKey(r)));
    expect(probed.map(v1Key).filter((k) => !(k in PROBES))).toEqual([]);
    expect(Object.keys(PROBES).filter((k) => !dashboard.includes(k.replace('/v1/', '/app/api/')))).toEqual(
      [],
    );
    expect(DASHBOARD_OWN_SESSION_ONLY.filter((k) => !dashboard.includes(k))).toEqual([]);
  });

  it("answers B's session on every /app/api route with 404 for A's resources, or with B's own data only", async () => {
    const { t, b } = w;
    const asB = { ...w, t: { ...t, http: new DashboardClient(t.url, `os_session=${b.cookie}`) } };
    for (const route of t.cloud.dashboardRoutes) {
      const probe = PROBES[v1Key(route)];
      if (!probe) continue; // DASHBOARD_OWN_SESSION_ONLY, checked above
      const answer = await probe.call(asB, {});
      try {
        await probe.asOutsider(answer, w);
      } catch (err) {
        throw new Error(`${routeKey(route)} as B: ${answer.status} ${answer.text}\n${String(err)}`, {
          cause: err,
        });
      }
    }
    expect(await snapshotOfA()).toEqual(before);
    const audit = await t.http.get('/v1/accounts/me/audit', { token: w.a.token });
    expect(audit.json.data.filter((e: { by: string }) => e.by !== w.a.userId)).toEqual([]);
  });

  it.each([
    ['no Authorization header', 401, 'auth_required', {}],
    ['a garbage token', 401, 'token_invalid', { token: 'garbage' }],
    ['an unknown user token', 401, 'token_invalid', { token: `ua_live_${'x'.repeat(43)}` }],
    ['a Basic header', 401, 'token_invalid', { headers: { authorization: 'Basic YTpi' } }],
    ['an empty Bearer header', 401, 'token_invalid', { headers: { authorization: 'Bearer ' } }],
    ['the session cookie instead of a token', 401, 'auth_required', 'cookie'],
    ["A's device token", 403, 'forbidden', 'device'],
    ["A's integration token", 403, 'forbidden', 'integration'],
  ] as const)('answers every management route called with %s: %i %s', async (_what, status, code, auth) => {
    const options: CallOptions =
      auth === 'device'
        ? { token: w.a.deviceToken }
        : auth === 'integration'
          ? { token: w.a.integrationToken }
          : auth === 'cookie'
            ? { cookie: `os_session=${w.a.cookie}` }
            : auth;
    for (const route of routes) {
      const probe = PROBES[routeKey(route)];
      if (!probe) continue;
      // the cookie is a valid credential on POST /v1/tokens only (docs/api/auth.md)
      if (auth === 'cookie' && route.auth === 'user-or-session') continue;
      const answer = await probe.call(w, options);
      expect([routeKey(route), answer.status, answer.json?.error?.code]).toEqual([
        routeKey(route),
        status,
        code,
      ]);
    }
    expect(await snapshotOfA()).toEqual(before);
  });

  it("refuses a revoked token and a deleted device's token on every management route with 401", async () => {
    const { t, a } = w;
    const spare = await t.http.post('/v1/tokens', { label: 'spare', scope: 'admin' }, { token: a.token });
    expect((await t.http.delete(`/v1/tokens/${spare.json.id}`, { token: a.token })).status).toBe(204);
    const site = await createSite(t, a.token, { name: 'Spare' });
    const gone = await createDevice(t, a.token, site.id);
    expect((await t.http.delete(`/v1/devices/${gone.id}`, { token: a.token })).status).toBe(204);
    for (const token of [spare.json.token, gone.ingest_token]) {
      for (const route of routes) {
        const answer = await PROBES[routeKey(route)]!.call(w, { token });
        expect([routeKey(route), answer.status, answer.json?.error?.code]).toEqual([
          routeKey(route),
          401,
          'token_invalid',
        ]);
      }
    }
  });

  it("ends only B's own sessions when B signs out everywhere through /app/api: A stays signed in", async () => {
    const { t, a, b } = w;
    const xhr = { 'x-requested-with': 'XMLHttpRequest' };
    const out = await t.http.post('/app/api/auth/logout-all', undefined, {
      cookie: `os_session=${b.cookie}`,
      headers: xhr,
    });
    expect(out.status).toBe(204);
    expect((await t.http.get('/app/api/accounts/me', { cookie: `os_session=${b.cookie}` })).status).toBe(401);
    const me = await t.http.get('/app/api/accounts/me', { cookie: `os_session=${a.cookie}` });
    expect([me.status, me.json.id]).toEqual([200, a.accountId]);
    const audit = await t.http.get('/v1/accounts/me/audit?kind=sessions.revoked', { token: a.token });
    expect(audit.json.data).toEqual([]);
  });
});
