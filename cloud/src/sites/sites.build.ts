import { SitesRepository } from './sites.repository.ts';

/** The sites' slice of the services. */
export function buildSites(): { sites: SitesRepository } {
  return { sites: new SitesRepository() };
}
