import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { Logger } from '../logger.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';
import { DevicesRepository } from './devices.repository.ts';
import { DevicesService } from './devices.service.ts';
import { DeviceMovesRepository } from './moves.repository.ts';
import { DeviceMovesService } from './moves.service.ts';

/** Devices and their moves between sites: their slice of the services (registers the moves' job). */
export function buildDevices(deps: {
  db: Db;
  clock: Clock;
  config: Config;
  log: Logger;
  jobs: JobQueue;
  sites: SitesRepository;
  audit: AuditRepository;
}): { devicesRepository: DevicesRepository; devices: DevicesService; deviceMoves: DeviceMovesService } {
  const { db, clock, config, log, jobs, sites, audit } = deps;
  const devicesRepository = new DevicesRepository();
  const devices = new DevicesService({ db, clock, config, devices: devicesRepository, sites, audit });
  const deviceMoves = new DeviceMovesService({
    db,
    clock,
    log: log.child({ module: 'devices' }),
    jobs,
    devices: devicesRepository,
    sites,
    moves: new DeviceMovesRepository(),
    audit,
  });
  deviceMoves.register();
  return { devicesRepository, devices, deviceMoves };
}
