import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import type { Ingest } from '../ingest/ingest.types.ts';
import type { Logger } from '../logger.ts';
import type { MeasurementsService } from '../measurements/measurements.service.ts';
import type { Db } from '../storage/database.ts';
import { PublicListing } from './public.listing.ts';
import { PublicRepository } from './public.repository.ts';
import { PublicService } from './public.service.ts';

/** The public community API: owners' settings, flags, and the cached public answers. */
export function buildPublic(deps: {
  db: Db;
  clock: Clock;
  log: Logger;
  audit: AuditRepository;
  ingest: Ingest;
  measurements: MeasurementsService;
}): { publicRepository: PublicRepository; publicApi: PublicService; publicListing: PublicListing } {
  const { db, clock, log, audit, ingest, measurements } = deps;
  const publicRepository = new PublicRepository();
  const publicListing = new PublicListing({
    db,
    clock,
    log: log.child({ module: 'public' }),
    publicRepository,
    readings: measurements,
    catchUp: () => ingest.catchUp(),
  });
  const publicApi = new PublicService({
    db,
    clock,
    publicRepository,
    audit,
    onChange: () => publicListing.invalidate(),
  });
  return { publicRepository, publicApi, publicListing };
}
