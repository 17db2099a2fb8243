import { Metrics } from './metrics.ts';

/** The Prometheus figures: their slice of the services, built before the parts that count into it. */
export function buildMetrics(): { metrics: Metrics } {
  return { metrics: new Metrics() };
}
