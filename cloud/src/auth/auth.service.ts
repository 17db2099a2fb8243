import { randomInt } from 'node:crypto';
import { newId, newSecret } from '../../../shared/ids.ts';
import type { AccountsRepository } from '../accounts/accounts.repository.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { RateLimited, Unauthenticated } from '../errors.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import { MAIL_JOB, type MailJob } from '../mail/mail-job.ts';
import type { RateLimiter } from '../limits/rate-limiter.ts';
import { isUniqueViolation, type Db } from '../storage/database.ts';
import type { AuthRepository, LoginCodeRow, SessionRow } from './auth.repository.ts';
import { hashSecret } from './secrets.ts';
import { addressBudget } from '../http/client-address.ts';

/** Without look-alikes (no 0/O, 1/I/L): docs/api/auth.md. */
export const CODE_ALPHABET = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789';
export const CODE_TTL_MICROS = 10 * 60 * 1_000_000;
const DAY_MICROS = 24 * 3600 * 1_000_000;
/** Rolling: every request extends a session to this long from now. */
export const SESSION_TTL_MICROS = 30 * DAY_MICROS;
export const MAX_CODE_ATTEMPTS = 5;
const CODES_PER_EMAIL = { limit: 5, windowSeconds: 600 };
const REQUESTS_PER_IP = { limit: 100, windowSeconds: 600 };
/**
 * Code entries (`POST /v1/auth/verify`): per address, room for a household or office behind one NAT
 * mistyping now and then; per e-mail, three codes' worth of tries (each code allows five).
 */
const VERIFIES_PER_IP = { limit: 60, windowSeconds: 600 };
const VERIFIES_PER_EMAIL = { limit: 15, windowSeconds: 600 };
/** Rolling expiry is written at most this often per session (every request still extends it logically). */
const SESSION_TOUCH_MICROS = 60 * 1_000_000;

export interface NewSession {
  session: SessionRow;
  /** The cookie value: shown once, stored only as a hash. */
  secret: string;
}

/** Sessions that ended by sign-out: one (`sessionId`) or every one of the user (`sessionId` null). */
export interface SessionsEnded {
  accountId: string;
  userId: string;
  sessionId: string | null;
}

export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** `abc-def`, `ABCDEF`, ` abc def ` → `ABCDEF` */
export function normaliseCode(code: string): string {
  return code.replace(/[\s-]/g, '').toUpperCase();
}

export function formatCode(code: string): string {
  return `${code.slice(0, 3)}-${code.slice(3)}`;
}

function codeHash(codeId: string, code: string): string {
  return hashSecret(`${codeId}:${code}`);
}

/**
 * Magic-link login: codes, the e-mailed link, sessions, sign-out (docs/api/auth.md).
 */
export class AuthService {
  private readonly endedListeners: ((ended: SessionsEnded) => void)[] = [];

  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      config: Config;
      auth: AuthRepository;
      accounts: AccountsRepository;
      audit: AuditRepository;
      jobs: JobQueue;
      rateLimiter: RateLimiter;
    },
  ) {}

  /**
   * Issues a code and mails it. Answers the same whether or not the e-mail is known; only the
   * per-IP limit is visible (429), the per-e-mail limit silently sends nothing. `browserSecret` is the
   * `os_signin` cookie given to the asking browser: the mail's link signs that browser in at once.
   */
  async requestCode(rawEmail: string, ip: string, browserSecret: string | null = null): Promise<void> {
    const { db, clock, config, auth, accounts, jobs, rateLimiter } = this.deps;
    await this.limit(
      `auth-ip:${addressBudget(ip)}`,
      REQUESTS_PER_IP,
      'too many sign-in requests from this address',
    );
    const email = normaliseEmail(rawEmail);
    const perEmail = await rateLimiter.hit(
      `auth-email:${hashSecret(email)}`,
      CODES_PER_EMAIL.limit,
      CODES_PER_EMAIL.windowSeconds,
    );
    if (!perEmail.allowed) return;
    const user = await accounts.findUserByEmail(db, email);
    if (!user && config.signup === 'closed') return;

    const now = clock.nowMicros();
    const code = Array.from({ length: 6 }, () => CODE_ALPHABET[randomInt(CODE_ALPHABET.length)]).join('');
    const linkToken = newSecret('');
    const id = newId('lc');
    const row: LoginCodeRow = {
      id,
      email,
      code_hash: codeHash(id, code),
      link_hash: hashSecret(linkToken),
      state: 'issued',
      attempts: 0,
      created_at: now,
      expires_at: now + CODE_TTL_MICROS,
      browser_hash: browserSecret === null ? null : hashSecret(browserSecret),
    };
    const link = `${config.baseUrl}/app/auth/callback?t=${linkToken}`;
    // One issued code per e-mail (a unique index): a request that meets another's code committed
    // meanwhile fails on the index and runs again, invalidating that code in its turn.
    await retryOnUniqueViolation(() =>
      db.transaction().execute(async (trx) => {
        await auth.invalidateIssuedCodes(trx, email);
        await auth.insertCode(trx, row);
        await jobs.enqueue(trx, MAIL_JOB, {
          to: email,
          subject: `Your sign-in code: ${formatCode(code)}`,
          text: [
            `Your sign-in code is ${formatCode(code)}`,
            '',
            'Enter it on the sign-in page, or open this link in the same browser:',
            link,
            '',
            'The code and the link work once, for 10 minutes. If you did not ask to sign in, ignore this mail.',
          ].join('\n'),
          secrets: [formatCode(code), linkToken],
          send_by: row.expires_at,
        } satisfies MailJob);
      }),
    );
    jobs.kick();
  }

  /**
   * Verifies `{email, code}`; wrong, expired, used, superseded or exhausted all give one 401
   * `code_invalid`. Each entry claims one of the code's attempts before it is compared, in one
   * statement, so concurrent guesses cannot compare more than MAX_CODE_ATTEMPTS times; entries are
   * also limited per address and per e-mail (429 with Retry-After).
   */
  async verifyCode(rawEmail: string, rawCode: string, ip: string): Promise<NewSession> {
    const { db, clock, auth } = this.deps;
    const email = normaliseEmail(rawEmail);
    await this.limit(
      `verify-ip:${addressBudget(ip)}`,
      VERIFIES_PER_IP,
      'too many sign-in codes entered from this address',
    );
    await this.limit(
      `verify-email:${hashSecret(email)}`,
      VERIFIES_PER_EMAIL,
      'too many sign-in codes entered for this e-mail',
    );
    const code = normaliseCode(rawCode);
    const now = clock.nowMicros();
    const latest = await auth.latestIssuedCode(db, email);
    if (!latest || latest.expires_at <= now) throw codeInvalid();
    const row = await auth.claimAttempt(db, latest.id, MAX_CODE_ATTEMPTS);
    if (!row) throw codeInvalid();
    // A wrong entry uses up a try of the code only: the link, which cannot be guessed, keeps working,
    // so that someone who knows the address cannot lock its owner out with five wrong entries.
    if (codeHash(row.id, code) !== row.code_hash) throw codeInvalid();
    return this.consume(row);
  }

  private async limit(bucket: string, rule: { limit: number; windowSeconds: number }, message: string) {
    const { config, rateLimiter } = this.deps;
    const result = await rateLimiter.hit(bucket, rule.limit, rule.windowSeconds);
    if (!result.allowed && config.rateLimitMode === 'enforce') {
      throw new RateLimited(result.retryAfterSeconds, message);
    }
  }

  /** The e-mailed link: same lifetime and single use as the code. */
  async verifyLink(linkToken: string): Promise<NewSession> {
    return this.consume(await this.issuedByLink(linkToken));
  }

  /**
   * The e-mailed link opened in a browser: it signs in at once when the browser is the one that
   * asked for the code (its `os_signin` cookie). Any other browser is answered the address the link
   * signs in as, to confirm first (`verifyLink`): a link from someone else's mail must not sign a
   * person into a stranger's account unawares (login CSRF).
   */
  async openLink(
    linkToken: string,
    browserSecret: string | null,
  ): Promise<{ signedIn: NewSession } | { confirm: { email: string } }> {
    const row = await this.issuedByLink(linkToken);
    const sameBrowser =
      row.browser_hash !== null && browserSecret !== null && hashSecret(browserSecret) === row.browser_hash;
    if (sameBrowser) return { signedIn: await this.consume(row) };
    return { confirm: { email: row.email } };
  }

  private async issuedByLink(linkToken: string): Promise<LoginCodeRow> {
    const { db, clock, auth } = this.deps;
    const row = await auth.findIssuedCodeByLink(db, hashSecret(linkToken));
    if (!row || row.expires_at <= clock.nowMicros()) throw codeInvalid();
    return row;
  }

  private async consume(code: LoginCodeRow): Promise<NewSession> {
    const { db, clock, config, auth, accounts } = this.deps;
    return db.transaction().execute(async (trx) => {
      if (!(await auth.consumeCode(trx, code.id))) throw codeInvalid();
      const now = clock.nowMicros();
      let user = await accounts.findUserByEmail(trx, code.email);
      if (!user) {
        if (config.signup === 'closed') throw codeInvalid();
        const accountId = newId('acc');
        user = { id: newId('usr'), account_id: accountId, email: code.email, created_at: now };
        await accounts.createAccountWithUser(trx, { id: accountId, name: code.email, created_at: now }, user);
      }
      const secret = newSecret('oss_');
      const session: SessionRow = {
        id: newId('ses'),
        user_id: user.id,
        account_id: user.account_id,
        secret_hash: hashSecret(secret),
        created_at: now,
        last_seen_at: now,
        expires_at: Math.min(now + SESSION_TTL_MICROS, sessionEnd(config, now)),
        revoked_at: null,
      };
      await auth.insertSession(trx, session);
      return { session, secret };
    });
  }

  /**
   * The live session for a cookie value, with its expiry rolled forward but never past
   * SESSION_MAX_DAYS after sign-in; null when none (the caller answers 401 `auth_required` for an
   * idle, an over-age and an unknown session alike).
   */
  async resolveSession(secret: string): Promise<SessionRow | null> {
    const { db, clock, config, auth } = this.deps;
    const now = clock.nowMicros();
    const session = await auth.findLiveSession(db, hashSecret(secret), now);
    if (!session) return null;
    const end = sessionEnd(config, session.created_at);
    if (end <= now) return null;
    const expiresAt = Math.min(now + SESSION_TTL_MICROS, end);
    if (now - session.last_seen_at >= SESSION_TOUCH_MICROS)
      await auth.touchSession(db, session.id, now, expiresAt);
    return { ...session, last_seen_at: now, expires_at: expiresAt };
  }

  /**
   * When a live session ends at the latest (its rolling expiry as last written, or SESSION_MAX_DAYS
   * after sign-in), without extending it; null when it has ended or was revoked. For connections
   * that stay open (the dashboard's stream): they last as long as the session, and do not keep it
   * alive by themselves.
   */
  async liveSessionEnd(sessionId: string): Promise<number | null> {
    const { db, clock, config, auth } = this.deps;
    const session = await auth.findSession(db, sessionId);
    if (!session || session.revoked_at !== null) return null;
    const end = Math.min(session.expires_at, sessionEnd(config, session.created_at));
    return end > clock.nowMicros() ? end : null;
  }

  /** Called after a sign-out commits (the live stream closes the connections of the ended sessions). */
  onSessionsEnded(listener: (ended: SessionsEnded) => void): void {
    this.endedListeners.push(listener);
  }

  async logout(secret: string): Promise<void> {
    const { db, clock, auth } = this.deps;
    const session = await auth.findLiveSession(db, hashSecret(secret), clock.nowMicros());
    if (!session) return;
    await auth.revokeSession(db, session.id, clock.nowMicros());
    this.tellEnded({ accountId: session.account_id, userId: session.user_id, sessionId: session.id });
  }

  private tellEnded(ended: SessionsEnded): void {
    for (const listener of this.endedListeners) listener(ended);
  }

  /** "Sign out everywhere": every session of the user, audit-logged. */
  async logoutEverywhere(session: { accountId: string; userId: string }): Promise<number> {
    const { db, clock, auth, audit } = this.deps;
    const revoked = await db.transaction().execute(async (trx) => {
      const now = clock.nowMicros();
      const revoked = await auth.revokeUserSessions(trx, session.userId, now);
      await audit.record(trx, {
        accountId: session.accountId,
        kind: 'sessions.revoked',
        by: session.userId,
        target: session.userId,
        details: { sessions: revoked },
        ts: now,
      });
      return revoked;
    });
    this.tellEnded({ accountId: session.accountId, userId: session.userId, sessionId: null });
    return revoked;
  }
}

/** When a session signed in at `createdAt` ends at the latest (SESSION_MAX_DAYS). */
function sessionEnd(config: Config, createdAt: number): number {
  return createdAt + config.sessionMaxDays * DAY_MICROS;
}

function codeInvalid(): Unauthenticated {
  return new Unauthenticated('code_invalid', 'the code is wrong, expired or already used; request a new one');
}

/**
 * Runs `work` again when it failed on a unique index another commit took first: each round lets one
 * of the requests at the same moment through, and an e-mail has at most 5 requests in 10 minutes.
 */
async function retryOnUniqueViolation<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      if (!isUniqueViolation(err) || attempt >= 9) throw err;
    }
  }
}
