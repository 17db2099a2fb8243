import type { Config } from '../config.ts';
import { SESSION_COOKIE } from '../http/credentials.ts';
import { CODE_TTL_MICROS, SESSION_TTL_MICROS } from './auth.service.ts';

/**
 * The `os_session` cookie with every attribute of the spec's table: Path=/, HttpOnly, Secure,
 * SameSite=Lax, Domain only when DASHBOARD_DOMAIN is set, and a rolling 30-day Max-Age (shorter when
 * SESSION_MAX_DAYS is; the server ends the session at its absolute limit whatever the browser keeps).
 */
/**
 * The session cookie. Its Max-Age is what is left of the session: `lifetimeMicros` when the session
 * is rolled forward (at most the rolling 30 days, never past SESSION_MAX_DAYS after sign-in); at
 * sign-in, the smaller of the two.
 */
export function sessionCookie(config: Config, secret: string, lifetimeMicros?: number): string {
  const lifetime =
    lifetimeMicros ?? Math.min(SESSION_TTL_MICROS, config.sessionMaxDays * 24 * 3600 * 1_000_000);
  return cookie(config, encodeURIComponent(secret), Math.max(0, Math.floor(lifetime / 1_000_000)));
}

/** The same cookie, expired: the browser drops it. */
export function clearedSessionCookie(config: Config): string {
  return cookie(config, '', 0);
}

function cookie(config: Config, value: string, maxAgeSeconds: number): string {
  const parts = [`${SESSION_COOKIE}=${value}`, 'Path=/', `Max-Age=${maxAgeSeconds}`];
  if (config.dashboardDomain) parts.push(`Domain=${config.dashboardDomain}`);
  parts.push('HttpOnly', 'Secure', 'SameSite=Lax');
  return parts.join('; ');
}

/** The cookie of the browser that asked for a sign-in code: sent to the mail's link only. */
export const SIGN_IN_COOKIE = 'os_signin';
const SIGN_IN_PATH = '/app/auth/callback';

/** `os_signin`, for the code's lifetime, on the callback's path alone. */
export function signInCookie(secret: string): string {
  const maxAge = Math.floor(CODE_TTL_MICROS / 1_000_000);
  return `${SIGN_IN_COOKIE}=${encodeURIComponent(secret)}; Path=${SIGN_IN_PATH}; Max-Age=${maxAge}; HttpOnly; Secure; SameSite=Lax`;
}

/** The same cookie, expired: its code is used. */
export function clearedSignInCookie(): string {
  return `${SIGN_IN_COOKIE}=; Path=${SIGN_IN_PATH}; Max-Age=0; HttpOnly; Secure; SameSite=Lax`;
}
