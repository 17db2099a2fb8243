import { AuditRepository } from './audit.repository.ts';

/** The audit log's slice of the services. */
export function buildAudit(): { audit: AuditRepository } {
  return { audit: new AuditRepository() };
}
