import { accountRoutes } from './accounts/accounts.routes.ts';
import { alertRuleRoutes } from './alert-rules/alert-rules.routes.ts';
import { auditRoutes } from './audit/audit.routes.ts';
import { authRoutes } from './auth/auth.routes.ts';
import { bridgeRoutes } from './bridges/bridges.routes.ts';
import { deviceRoutes } from './devices/devices.routes.ts';
import { eventRoutes } from './events/events.routes.ts';
import { deviceMoveRoutes } from './devices/moves.routes.ts';
import { exportRoutes } from './export/export.routes.ts';
import { healthRoutes } from './health/health.routes.ts';
import { openApiDocument } from './http/openapi.ts';
import { dashboardRoutes, type RouteDef } from './http/route-table.ts';
import { ingestRoutes } from './ingest/ingest.routes.ts';
import { liveRoutes } from './live/live.routes.ts';
import { integrationRoutes } from './integrations/integrations.routes.ts';
import { integrationWebhookRoutes } from './integrations/integrations.webhooks.routes.ts';
import { metricsRoutes } from './metrics/metrics.routes.ts';
import { measurementRoutes } from './measurements/measurements.routes.ts';
import { publicRoutes } from './public/public.routes.ts';
import { reportRoutes } from './reports/reports.routes.ts';
import { reportRecipientRoutes } from './report-schedules/report-recipients.routes.ts';
import { reportScheduleRoutes } from './report-schedules/report-schedules.routes.ts';
import { ruleRoutes } from './rules/rules.routes.ts';
import { sensorRoutes } from './sensors/sensors.routes.ts';
import type { Services } from './services.ts';
import { silenceRoutes } from './silences/silences.routes.ts';
import { siteRoutes } from './sites/sites.routes.ts';
import { tokenRoutes } from './tokens/tokens.routes.ts';
import { webhookRoutes } from './webhooks/webhooks.routes.ts';

/** Every HTTP endpoint of the cloud, one router file per resource. */
export function allRoutes(s: Services): RouteDef[] {
  const routes: RouteDef[] = [
    {
      method: 'get',
      path: '/v1/openapi.json',
      auth: 'none',
      summary: 'This API as an OpenAPI 3.1 document',
      success: { status: 200, description: 'the OpenAPI document' },
      handler: async () => ({ status: 200, body: openApiDocument(routes, s.config) }),
    },
    ...ingestRoutes(s),
    ...authRoutes(s),
    ...tokenRoutes(s),
    ...accountRoutes(s),
    ...auditRoutes(s),
    ...siteRoutes(s),
    ...deviceRoutes(s),
    ...deviceMoveRoutes(s),
    ...sensorRoutes(s),
    ...silenceRoutes(s),
    ...ruleRoutes(s),
    ...eventRoutes(s),
    ...webhookRoutes(s),
    ...bridgeRoutes(s),
    ...measurementRoutes(s),
    ...exportRoutes(s),
    ...reportRoutes(s),
    ...reportScheduleRoutes(s),
    ...reportRecipientRoutes(s),
    ...integrationRoutes(s),
    ...integrationWebhookRoutes(s),
    ...alertRuleRoutes(s),
    ...publicRoutes(s),
    ...healthRoutes(s),
    ...metricsRoutes(s),
  ];
  return routes;
}

/**
 * The dashboard's private JSON surface under `/app/api` (docs/api/dashboard.md): the `/v1` routes a
 * signed-in person uses, derived from their definitions (same handlers, same rules), and the live
 * stream. Not in the OpenAPI document, which describes `/v1`.
 */
export function allDashboardRoutes(s: Services, v1: readonly RouteDef[]): RouteDef[] {
  return [...dashboardRoutes(v1), ...liveRoutes(s)];
}
