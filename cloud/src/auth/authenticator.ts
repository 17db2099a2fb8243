import type { Clock } from '../clock.ts';
import { Forbidden, Unauthenticated } from '../errors.ts';
import type { DevicePrincipal, Principal, UserPrincipal } from '../http/context.ts';
import { bearerToken, readCookie, SESSION_COOKIE } from '../http/credentials.ts';
import type { Db } from '../storage/database.ts';
import type { TokensRepository } from '../tokens/tokens.repository.ts';
import type { AuthService } from './auth.service.ts';
import { hashSecret } from './secrets.ts';

export const USER_TOKEN_PREFIX = 'ua_live_';
export const DEVICE_TOKEN_PREFIX = 'ds_live_';
export const WEBHOOK_TOKEN_PREFIX = 'whk_';

/**
 * Turns credentials into a Principal (docs/api/auth.md).
 * Management routes take user tokens; ingest routes take device tokens; a token of the other kind is
 * 403 `forbidden`, a missing one 401 `auth_required` (ingest: `token_invalid`), a wrong one 401.
 */
export class Authenticator {
  constructor(
    private readonly deps: { db: Db; clock: Clock; tokens: TokensRepository; authService: AuthService },
  ) {}

  async user(header: string | undefined): Promise<UserPrincipal> {
    const token = bearerToken(header);
    if (token === null) throw new Unauthenticated('auth_required', 'send Authorization: Bearer <token>');
    if (token.startsWith(USER_TOKEN_PREFIX)) {
      const row = await this.deps.tokens.findLiveByHash(this.deps.db, hashSecret(token));
      if (row) {
        await this.deps.tokens.touch(this.deps.db, row.id, this.deps.clock.nowMicros());
        return {
          kind: 'user',
          accountId: row.account_id,
          userId: row.user_id,
          tokenId: row.id,
          scope: row.scope,
        };
      }
    } else if (token.startsWith(DEVICE_TOKEN_PREFIX)) {
      if (await this.deviceOrNull(token)) {
        throw new Forbidden('forbidden', 'a device token cannot be used on management endpoints');
      }
    } else if (token.startsWith(WEBHOOK_TOKEN_PREFIX)) {
      if (await this.integrationExists(token)) {
        throw new Forbidden('forbidden', 'an integration token cannot be used on management endpoints');
      }
    }
    throw new Unauthenticated('token_invalid', 'the token is unknown, revoked or malformed');
  }

  async device(token: string | null): Promise<DevicePrincipal> {
    if (!token) throw new Unauthenticated('token_invalid', 'a device token is required');
    if (token.startsWith(USER_TOKEN_PREFIX)) {
      if (await this.deps.tokens.findLiveByHash(this.deps.db, hashSecret(token))) {
        throw new Forbidden('forbidden', 'a user token cannot be used on ingest endpoints');
      }
    } else {
      const device = await this.deviceOrNull(token);
      if (device) return device;
    }
    throw new Unauthenticated('token_invalid', 'the device token is unknown, revoked or malformed');
  }

  private async integrationExists(token: string): Promise<boolean> {
    const row = await this.deps.db
      .selectFrom('integrations')
      .select('id')
      .where('token_hash', '=', hashSecret(token))
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return row !== undefined;
  }

  private async deviceOrNull(token: string): Promise<DevicePrincipal | null> {
    if (!token.startsWith(DEVICE_TOKEN_PREFIX)) return null;
    const row = await this.deps.db
      .selectFrom('devices')
      .select(['id', 'account_id', 'site_id', 'local_id', 'model'])
      .where('token_hash', '=', hashSecret(token))
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    if (!row) return null;
    return {
      kind: 'device',
      accountId: row.account_id,
      deviceId: row.id,
      siteId: row.site_id,
      localId: row.local_id,
      model: row.model,
    };
  }

  /**
   * The session behind an `os_session` cookie (rolled forward), with what is left of it in
   * microseconds (the refreshed cookie's Max-Age), or null.
   */
  async session(
    cookieHeader: string | undefined,
  ): Promise<{ principal: UserPrincipal & { kind: 'session' }; remainingMicros: number } | null> {
    const secret = readCookie(cookieHeader, SESSION_COOKIE);
    if (!secret) return null;
    const session = await this.deps.authService.resolveSession(secret);
    if (!session) return null;
    return {
      principal: {
        kind: 'session',
        accountId: session.account_id,
        userId: session.user_id,
        sessionId: session.id,
        scope: 'admin',
      },
      remainingMicros: session.expires_at - this.deps.clock.nowMicros(),
    };
  }
}

export type { Principal };
