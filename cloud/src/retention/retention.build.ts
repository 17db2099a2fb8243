import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Ingest } from '../ingest/ingest.types.ts';
import type { Logger } from '../logger.ts';
import type { MeasurementsRepository } from '../measurements/measurements.repository.ts';
import type { Db } from '../storage/database.ts';
import { RetentionJob } from './retention.ts';

/** The retention job: its slice of the services. */
export function buildRetention(deps: {
  db: Db;
  clock: Clock;
  config: Config;
  log: Logger;
  measurementsRepository: MeasurementsRepository;
  ingest: Ingest;
}): { retention: RetentionJob } {
  const { db, clock, config, log, measurementsRepository, ingest } = deps;
  const retention = new RetentionJob({
    db,
    clock,
    config,
    log: log.child({ module: 'retention' }),
    measurements: measurementsRepository,
    catchUp: () => ingest.catchUp(),
  });
  return { retention };
}
