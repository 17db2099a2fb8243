import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * One JSON logger for the process. Secrets are redacted here, once: authorization headers, cookies,
 * and any `token` value (query values are scrubbed from URLs by `redactUrl` before they are logged).
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      redact: {
        paths: ['authorization', 'cookie', 'token', '*.authorization', '*.cookie', '*.token', 'headers.*'],
        censor: '[redacted]',
      },
    },
    destination ?? process.stdout,
  );
}

/** `/v1/ingest/shelly?token=ds_live_x&device=a` → `/v1/ingest/shelly?token=[redacted]&device=a` */
export function redactUrl(url: string): string {
  return url.replace(/([?&](?:token|t)=)[^&#]*/gi, '$1[redacted]');
}
