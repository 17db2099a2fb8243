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

/** `/v1/ingest/shelly?token=ds_live_x&device=a` → `/v1/ingest/shelly?token=[redacted]&device=a` */
export function redactUrl(url: string): string {
  return url.replace(/([?&](?:token|t)=)[^&#]*/gi, '$1[redacted]');
}
