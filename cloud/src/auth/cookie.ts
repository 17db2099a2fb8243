import type { Config } from '../config.ts';
import { SESSION_TTL_MICROS } from './auth.service.ts';
import { SESSION_COOKIE } from './authenticator.ts';

/**
 * The `os_session` cookie with every attribute of the spec's table: Path=/, HttpOnly, Secure,
 * SameSite=Lax, Domain only when DASHBOARD_DOMAIN is set, and a rolling 30-day Max-Age (shorter when
 * SESSION_MAX_DAYS is; the server ends the session at its absolute limit whatever the browser keeps).
 */
export function sessionCookie(config: Config, secret: string): string {
  const maxAgeSeconds = Math.min(SESSION_TTL_MICROS / 1_000_000, config.sessionMaxDays * 24 * 3600);
  return cookie(config, encodeURIComponent(secret), Math.floor(maxAgeSeconds));
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
