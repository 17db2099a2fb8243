import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import type { Db } from '../storage/database.ts';
import { TokensRepository } from './tokens.repository.ts';
import { TokensService } from './tokens.service.ts';

/** The device and API tokens' slice of the services. */
export function buildTokens(deps: { db: Db; clock: Clock; audit: AuditRepository }): {
  tokensRepository: TokensRepository;
  tokens: TokensService;
} {
  const { db, clock, audit } = deps;
  const tokensRepository = new TokensRepository();
  return { tokensRepository, tokens: new TokensService({ db, clock, tokens: tokensRepository, audit }) };
}
