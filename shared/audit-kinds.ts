/**
 * Every kind of audit entry the cloud writes (docs/api/auth.md, "Account"): the cloud's type of an
 * entry's kind and the dashboard's filter of the audit trail read this one list.
 */
export const AUDIT_KINDS = [
  'threshold.changed',
  'sensor.recomputed',
  'event.acknowledged',
  'silence.created',
  'silence.ended',
  'device.created',
  'device.updated',
  'device.deleted',
  'device.moved',
  'device.token_rotated',
  'device.public_changed',
  'site.created',
  'site.updated',
  'site.deleted',
  'token.created',
  'token.revoked',
  'bridge.created',
  'bridge.revoked',
  'webhook.created',
  'webhook.deleted',
  'sessions.revoked',
  'report.created',
  'report_schedule.created',
  'report_schedule.deleted',
  'report_recipient.confirmed',
  'report_recipient.declined',
  'integration.created',
  'integration.deleted',
  'integration.token_rotated',
  'alert_rule.created',
  'alert_rule.changed',
  'alert_rule.deleted',
] as const;

export type AuditKind = (typeof AUDIT_KINDS)[number];
