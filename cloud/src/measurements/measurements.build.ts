import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Ingest } from '../ingest/ingest.types.ts';
import type { Db } from '../storage/database.ts';
import { MeasurementsRepository } from './measurements.repository.ts';
import { MeasurementsService } from './measurements.service.ts';

/** Measurement reads (raw, rollups, CSV): their slice of the services. Reads catch ingest up first. */
export function buildMeasurements(deps: { db: Db; clock: Clock; config: Config; ingest: Ingest }): {
  measurementsRepository: MeasurementsRepository;
  measurements: MeasurementsService;
} {
  const { db, clock, config, ingest } = deps;
  const measurementsRepository = new MeasurementsRepository();
  const measurements = new MeasurementsService({
    db,
    clock,
    config,
    measurements: measurementsRepository,
    catchUp: () => ingest.catchUp(),
  });
  return { measurementsRepository, measurements };
}
