import type { AccountsRepository } from '../accounts/accounts.repository.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { RateLimiter } from '../limits/rate-limiter.ts';
import type { Db } from '../storage/database.ts';
import type { TokensRepository } from '../tokens/tokens.repository.ts';
import { AuthRepository } from './auth.repository.ts';
import { AuthService } from './auth.service.ts';
import { Authenticator } from './authenticator.ts';

/** Sign-up, sessions and the authentication of every request: their slice of the services. */
export function buildAuth(deps: {
  db: Db;
  clock: Clock;
  config: Config;
  accounts: AccountsRepository;
  audit: AuditRepository;
  jobs: JobQueue;
  rateLimiter: RateLimiter;
  tokensRepository: TokensRepository;
}): { authRepository: AuthRepository; authService: AuthService; authenticator: Authenticator } {
  const { db, clock, config, accounts, audit, jobs, rateLimiter, tokensRepository } = deps;
  const authRepository = new AuthRepository();
  const authService = new AuthService({
    db,
    clock,
    config,
    auth: authRepository,
    accounts,
    audit,
    jobs,
    rateLimiter,
  });
  const authenticator = new Authenticator({ db, clock, tokens: tokensRepository, authService });
  return { authRepository, authService, authenticator };
}
