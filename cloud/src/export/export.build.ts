import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { DeviceMoves } from '../devices/moves.ts';
import type { MeasurementsRepository } from '../measurements/measurements.repository.ts';
import type { MeasurementsService } from '../measurements/measurements.service.ts';
import type { Db } from '../storage/database.ts';
import { ExportRepository } from './export.repository.ts';
import { AccountExport } from './export.service.ts';

/** The account export: its slice of the services. */
export function buildExport(deps: {
  db: Db;
  clock: Clock;
  config: Config;
  measurementsRepository: MeasurementsRepository;
  measurements: MeasurementsService;
  deviceMoves: DeviceMoves;
}): { accountExport: AccountExport } {
  const { db, clock, config, measurementsRepository, measurements, deviceMoves } = deps;
  return {
    accountExport: new AccountExport({
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
