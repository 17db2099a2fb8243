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
    details: holdsRules(a) ? withMaskedRules(details) : details,
  };
}

/** An entry's details as JSON text, as `auditView` shows them: stored text unless it holds a rule. */
export function auditDetailsJson(a: Tables['audit_log']): string {
  return holdsRules(a) ? JSON.stringify(withMaskedRules(JSON.parse(a.details))) : a.details;
}

/** Alert rule entries hold the rule before and after, chat URLs included. */
function holdsRules(a: Tables['audit_log']): boolean {
  return a.kind.startsWith('alert_rule.');
}
