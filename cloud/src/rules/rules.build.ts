import type { AccountsRepository } from '../accounts/accounts.repository.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Ingest } from '../ingest/ingest.types.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { Logger } from '../logger.ts';
import { AlarmMailAndWebhooks } from '../notify/alarm-mail-and-webhooks.ts';
import type { Database } from '../storage/database.ts';
import type { WebhooksService } from '../webhooks/webhooks.service.ts';
import { RuleEngine } from './rule-engine.ts';
import { RulesRepository } from './rules.repository.ts';

/**
 * The rule engine: its slice of the services. It catches ingest's derived state up before each
 * pass, and ingest kicks it after each commit (the marker it reads was written in that transaction).
 */
export function buildRules(deps: {
  database: Database;
  clock: Clock;
  config: Config;
  log: Logger;
  jobs: JobQueue;
  accounts: AccountsRepository;
  webhooks: WebhooksService;
  ingest: Ingest;
}): {
  /** The rule engine: states, alarm events, the tick; started by `Cloud.start()`. */
  rules: RuleEngine;
} {
  const { database, clock, config, log, jobs, accounts, webhooks, ingest } = deps;
  const rules = new RuleEngine({
    database,
    clock,
    log: log.child({ module: 'rules' }),
    repository: new RulesRepository(),
    notifier: new AlarmMailAndWebhooks({ config, jobs, accounts, webhooks }),
    catchUp: () => ingest.catchUp(),
  });
  ingest.onAccepted(() => rules.kick());
  return { rules };
}
