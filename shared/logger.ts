import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * The JSON logger both programs use (pino): one per process, a child per module, secrets redacted
 * here, once, by the paths each program names.
 */
export function createJsonLogger(
  level: string,
  redactPaths: string[],
  destination?: NodeJS.WritableStream,
): Logger {
  return pino(
    { level, base: undefined, redact: { paths: redactPaths, censor: '[redacted]' } },
    destination ?? process.stdout,
  );
}
