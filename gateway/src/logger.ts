import { createJsonLogger, type Logger } from '../../shared/logger.ts';

export type { Logger };

/**
 * One JSON logger for the gateway; each module takes a child with its namespace
 * (`log.child({ module: 'uplink' })`). Key material and passwords are redacted here, once.
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return createJsonLogger(
    level,
    ['key_pem', '*.key_pem', 'password', '*.password', 'token', '*.token', 'query.token'],
    destination,
  );
}
