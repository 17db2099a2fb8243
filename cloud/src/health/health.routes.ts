import type { RouteDef } from '../http/route-table.ts';
import type { Health } from './health.service.ts';

export interface HealthRoutesDeps {
  health: Health;
}

/**
 * The load balancer's checks, outside `/v1` and without credentials (docs/operations.md,
 * "Production layout"). Neither is rate-limited: a balancer asks every second or two.
 */
export function healthRoutes(s: HealthRoutesDeps): RouteDef[] {
  return [
    {
      method: 'get',
      path: '/healthz',
      auth: 'none',
      summary: 'Liveness: the process answers',
      success: { status: 200, description: '`{"status":"ok"}`' },
      handler: async () => ({
        status: 200,
        body: { status: 'ok' },
        headers: { 'Cache-Control': 'no-store' },
      }),
    },
    {
      method: 'get',
      path: '/readyz',
      auth: 'none',
      summary: 'Readiness: the database answers, migrations are applied and the process is not stopping',
      success: { status: 200, description: '`{"status":"ready"}`' },
      errors: ['not_ready', 'db_unavailable'],
      handler: async () => {
        await s.health.ready();
        return { status: 200, body: { status: 'ready' }, headers: { 'Cache-Control': 'no-store' } };
      },
    },
  ];
}
