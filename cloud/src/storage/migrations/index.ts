import { initial } from './0001_initial.ts';
import { rules } from './0002_rules.ts';
import { reads } from './0003_reads.ts';
import { bridges } from './0004_bridges.ts';
import { ingestJournal } from './0005_ingest_journal.ts';
import { measurementGroups } from './0006_measurement_groups.ts';
import { journalUncompressed } from './0007_journal_uncompressed.ts';
import type { Migration } from './migration.ts';
import { reports } from './0008_reports.ts';
import { auditChain } from './0009_audit_chain.ts';
import { reportSchedules } from './0010_report_schedules.ts';
import { integrations } from './0011_integrations.ts';
import { publicApi } from './0012_public.ts';
import { alertRules } from './0013_alert_rules.ts';
import { integrationModel } from './0014_integration_model.ts';
import { cluster } from './0015_cluster.ts';
import { signInBrowser } from './0016_sign_in_browser.ts';
import { reportRecipients } from './0017_report_recipients.ts';
import { installationSecret } from './0018_installation_secret.ts';
import { oneIssuedCode } from './0019_one_issued_code.ts';
import { webhookDeliveriesCreated } from './0020_webhook_deliveries_created.ts';

/**
 * Versioned, append-only migrations, applied at start on both databases. Never edit a migration that
 * has shipped: add the next one. `test/cloud/storage/contract.test.ts` checks that each is applied
 * once, also by several processes starting together, and that every repository reads back alike on
 * both. Each migration's type is in `migration.ts`, which imports nothing.
 */
export const MIGRATIONS: readonly Migration[] = [
  initial,
  rules,
  reads,
  bridges,
  ingestJournal,
  measurementGroups,
  journalUncompressed,
  reports,
  auditChain,
  reportSchedules,
  integrations,
  publicApi,
  alertRules,
  integrationModel,
  cluster,
  signInBrowser,
  reportRecipients,
  installationSecret,
  oneIssuedCode,
  webhookDeliveriesCreated,
];
