import { formatSeconds } from '../../../shared/time.ts';
import { withMaskedRules } from '../alert-rules/chat-urls.ts';
import type { Tables } from '../storage/schema.ts';

/**
 * An audit log entry as the API shows it: the time in RFC 3339 UTC to the second, details parsed,
 * an alert rule's chat URLs masked as the rule's own answers show them.
 */
export function auditView(a: Tables['audit_log']) {
  const details = JSON.parse(a.details) as unknown;
  return {
    id: a.id,
    ts: formatSeconds(a.ts),
    kind: a.kind,
    by: a.actor,
    target: a.target,
    details: a.kind.startsWith('alert_rule.') ? withMaskedRules(details) : details,
  };
}
