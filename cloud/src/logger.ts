import { SECRET_PREFIXES } from '../../shared/ids.ts';
import { createJsonLogger, type Logger } from '../../shared/logger.ts';

export type { Logger };

/**
 * One JSON logger for the process. Secrets are redacted here, once: authorization headers, cookies,
 * and any `token` value (query values are scrubbed from URLs by `redactUrl` before they are logged).
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return createJsonLogger(
    level,
    ['authorization', 'cookie', 'token', '*.authorization', '*.cookie', '*.token', 'headers.*'],
    destination,
  );
}

/** Query keys whose values are secrets: tokens (`token`), magic-link tokens (`t`), sign-in codes. */
const SECRET_KEYS = new Set(['token', 't', 'code']);

function decoded(part: string): string {
  try {
    return decodeURIComponent(part.replace(/\+/g, ' '));
  } catch {
    return part;
  }
}

function holdsSecret(value: string): boolean {
  return SECRET_PREFIXES.some((p) => value.includes(p));
}

/**
 * `/v1/ingest/shelly?token=ds_live_x&device=a` → `/v1/ingest/shelly?token=[redacted]&device=a`.
 * Keys are compared as the server reads them (percent-decoded, any case: `%74oken` is `token`), and
 * any value that holds a secret by its prefix is redacted whatever its key. A path segment that holds
 * one (a token pasted into a URL) is redacted too.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  const pathEnd = q < 0 ? url.length : q;
  const path = url
    .slice(0, pathEnd)
    .split('/')
    .map((segment) => (holdsSecret(decoded(segment)) ? '[redacted]' : segment))
    .join('/');
  if (q < 0) return path;
  const hash = url.indexOf('#', q);
  const query = url.slice(q + 1, hash < 0 ? undefined : hash);
  const pairs = query.split('&').map((pair) => {
    const eq = pair.indexOf('=');
    if (eq < 0) return holdsSecret(decoded(pair)) ? '[redacted]' : pair;
    const key = decoded(pair.slice(0, eq)).trim().toLowerCase();
    const value = decoded(pair.slice(eq + 1)).trim();
    const secret = SECRET_KEYS.has(key) || holdsSecret(value) || holdsSecret(key);
    return secret ? `${holdsSecret(key) ? '[redacted]' : pair.slice(0, eq)}=[redacted]` : pair;
  });
  return `${path}?${pairs.join('&')}${hash < 0 ? '' : url.slice(hash)}`;
}
