import { timingSafeEqual } from 'node:crypto';
import proxyaddr from 'proxy-addr';
import type { Config } from '../config.ts';
import { Forbidden } from '../errors.ts';
import { bearerToken } from '../http/credentials.ts';
import type { RouteDef } from '../http/route-table.ts';
import type { Db } from '../storage/database.ts';
import type { Metrics, MetricSources } from './metrics.ts';
import { jobFigures } from './metrics.repository.ts';

export interface MetricsRoutesDeps extends Omit<MetricSources, 'jobs'> {
  metrics: Metrics;
  db: Db;
  config: Pick<Config, 'metricsAllow' | 'metricsToken'>;
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * `GET /metrics` in Prometheus' text format, outside `/v1`. Allowed from the addresses of
 * METRICS_ALLOW (the client address as TRUST_PROXY resolves it; loopback by default) or with
 * `Authorization: Bearer <METRICS_TOKEN>` from anywhere; anyone else gets 403 `forbidden`.
 */
export function metricsRoutes(s: MetricsRoutesDeps): RouteDef[] {
  const allowed = proxyaddr.compile([...s.config.metricsAllow]);
  return [
    {
      method: 'get',
      path: '/metrics',
      auth: 'none',
      summary: 'Prometheus metrics of this process (from METRICS_ALLOW networks or with METRICS_TOKEN)',
      success: { status: 200, description: 'Prometheus text exposition format' },
      errors: ['forbidden'],
      handler: async (req, res) => {
        const token = bearerToken(req.get('authorization'));
        const byToken =
          s.config.metricsToken !== null && token !== null && sameSecret(token, s.config.metricsToken);
        if (!byToken && !allowed(req.ip ?? '', 0)) {
          throw new Forbidden(
            'forbidden',
            'metrics are served to METRICS_ALLOW networks or with METRICS_TOKEN',
          );
        }
        const text = await s.metrics.scrape({ ...s, jobs: () => jobFigures(s.db) });
        res.status(200).set('Cache-Control', 'no-store').type(s.metrics.contentType).send(text);
        return undefined;
      },
    },
  ];
}
