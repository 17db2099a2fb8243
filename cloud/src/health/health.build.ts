import type { Db } from '../storage/database.ts';
import { Health } from './health.service.ts';

/** The health checks: their slice of the services. */
export function buildHealth(deps: { db: Db }): { health: Health } {
  return { health: new Health({ db: deps.db }) };
}
