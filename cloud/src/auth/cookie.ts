import type { Config } from '../config.ts';
import { SESSION_COOKIE } from '../http/credentials.ts';
import { SESSION_TTL_MICROS } from './auth.service.ts';

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
