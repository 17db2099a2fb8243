import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { DeviceMovesService } from '../devices/moves.service.ts';
import type { MeasurementsRepository } from '../measurements/measurements.repository.ts';
import type { MeasurementsService } from '../measurements/measurements.service.ts';
import type { Db } from '../storage/database.ts';
import { ExportRepository } from './export.repository.ts';
import { ExportService } from './export.service.ts';

/** The account export: its slice of the services. */
export function buildExport(deps: {
  db: Db;
  clock: Clock;
  config: Config;
  measurementsRepository: MeasurementsRepository;
  measurements: MeasurementsService;
  deviceMoves: DeviceMovesService;
}): { accountExport: ExportService } {
  const { db, clock, config, measurementsRepository, measurements, deviceMoves } = deps;
  return {
    accountExport: new ExportService({
      db,
      clock,
      config,
      exports: new ExportRepository(),
      measurementsRepository,
      measurements,
      deviceMoves,
    }),
  };
}
