import type { Logger } from '../logger.ts';
import type { Db } from '../storage/database.ts';
import { Health } from './health.service.ts';

/** The health checks: their slice of the services. */
export function buildHealth(deps: { db: Db; log: Logger }): { health: Health } {
  return { health: new Health({ db: deps.db, log: deps.log.child({ module: 'health' }) }) };
}
