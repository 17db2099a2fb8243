import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { DevicesRepository } from '../devices/devices.repository.ts';
import type { Ingest } from '../ingest/ingest.types.ts';
import type { RateLimiter } from '../limits/rate-limiter.ts';
import type { Logger } from '../logger.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';
import { IntegrationDevices } from './integration-devices.ts';
import { IntegrationWebhooks } from './integration-webhooks.ts';
import { IntegrationsRepository } from './integrations.repository.ts';
import { IntegrationsService } from './integrations.service.ts';

/** Inbound integrations: their management and the webhooks they deliver through. */
export function buildIntegrations(deps: {
  db: Db;
  clock: Clock;
  config: Config;
  log: Logger;
  audit: AuditRepository;
  sites: SitesRepository;
  devicesRepository: DevicesRepository;
  ingest: Ingest;
  rateLimiter: RateLimiter;
}): {
  integrationsRepository: IntegrationsRepository;
  integrations: IntegrationsService;
  integrationWebhooks: IntegrationWebhooks;
} {
  const { db, clock, config, audit, sites, devicesRepository, ingest, rateLimiter } = deps;
  const log = deps.log.child({ module: 'integrations' });
  const integrationsRepository = new IntegrationsRepository();
  const devices = new IntegrationDevices({
    db,
    clock,
    devices: devicesRepository,
    sites,
    audit,
    rateLimiter,
    log,
  });
  const integrationWebhooks = new IntegrationWebhooks({
    db,
    clock,
    config,
    log,
    integrations: integrationsRepository,
    devices,
    ingest,
  });
  const integrations = new IntegrationsService({
    db,
    clock,
    config,
    integrations: integrationsRepository,
    sites,
    audit,
    tokenRevoked: (id) => integrationWebhooks.forget(id),
  });
  return { integrationsRepository, integrations, integrationWebhooks };
}
