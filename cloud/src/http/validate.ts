import type { z } from 'zod';
import { InvalidRequest, type ErrorDetail } from '../errors.ts';

/** zod issues as the `details` of a 400 `invalid_request`: `[{path, message}]`. */
export function issuesToDetails(error: z.ZodError): ErrorDetail[] {
  return error.issues.map((issue) => ({
    path: issue.path.length ? issue.path.join('.') : '(root)',
    message: issue.message,
  }));
}

/** Parses a body or query with its schema; failure is 400 `invalid_request` with details. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, what = 'request'): z.output<S> {
  const result = schema.safeParse(input ?? {});
  if (result.success) return result.data;
  const details = issuesToDetails(result.error);
  const first = details[0];
  throw new InvalidRequest(
    'invalid_request',
    first ? `invalid ${what}: ${first.path}: ${first.message}` : `invalid ${what}`,
    details,
  );
}
