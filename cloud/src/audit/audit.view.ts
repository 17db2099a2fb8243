import { formatSeconds } from '../../../shared/time.ts';
import type { Tables } from '../storage/schema.ts';

/** An audit log entry as the API shows it: the time in RFC 3339 UTC to the second, details parsed. */
export function auditView(a: Tables['audit_log']) {
  return {
    id: a.id,
    ts: formatSeconds(a.ts),
    kind: a.kind,
    by: a.actor,
    target: a.target,
    details: JSON.parse(a.details) as unknown,
  };
}
