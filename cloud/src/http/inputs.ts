import { z } from 'zod';
import { parseTimestampMicros } from '../../../shared/time.ts';

/** Shared zod pieces for request bodies and queries. */

/**
 * RFC 3339 with an explicit offset, as microseconds since the epoch. The OpenAPI document says
 * `format: date-time`, so that clients generated from it, and the fuzzer, send timestamps.
 */
export const timestamp = z
  .string()
  .meta({ format: 'date-time', examples: ['2026-01-05T10:00:00Z'] })
  .transform((text, ctx) => {
    const micros = parseTimestampMicros(text);
    if (micros === null) {
      ctx.addIssue({
        code: 'custom',
        message: 'must be an RFC 3339 timestamp with an offset, e.g. 2026-01-05T10:00:00Z',
      });
      return z.NEVER;
    }
    return micros;
  });

export const queryBoolean = z.enum(['true', 'false']).transform((v) => v === 'true');

export function isValidTimezone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

export const timezone = z.string().refine(isValidTimezone, 'must be an IANA time zone such as Europe/Berlin');

export const name = z.string().trim().min(1).max(200);
