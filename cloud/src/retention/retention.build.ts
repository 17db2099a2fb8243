import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Ingest } from '../ingest/ingest.types.ts';
import type { Logger } from '../logger.ts';
import type { MeasurementsRepository } from '../measurements/measurements.repository.ts';
import type { Database, Db } from '../storage/database.ts';
import { RetentionJob } from './retention.ts';

/** The retention job: its slice of the services. */
export function buildRetention(deps: {
  db: Db;
  database: Database;
  clock: Clock;
  config: Config;
  log: Logger;
  measurementsRepository: MeasurementsRepository;
  ingest: Ingest;
}): { retention: RetentionJob } {
  const { db, database, clock, config, log, measurementsRepository, ingest } = deps;
  const retention = new RetentionJob({
    db,
    database,
    clock,
    config,
    log: log.child({ module: 'retention' }),
    measurements: measurementsRepository,
    catchUp: () => ingest.catchUp(),
  });
  return { retention };
}
