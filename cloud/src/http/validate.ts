import type { z } from 'zod';
import { InvalidRequest, notFound, type ErrorDetail } from '../errors.ts';

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

/**
 * 404 before 400 (docs/api.md): a create body whose `site_id` names no site of the caller's account
 * is answered `site_not_found`, whatever else in it is wrong; checked before the body is validated.
 */
export async function siteOfBodyFirst(
  body: unknown,
  exists: (siteId: string) => Promise<boolean>,
): Promise<void> {
  const siteId = (body as { site_id?: unknown } | null | undefined)?.site_id;
  if (typeof siteId === 'string' && !(await exists(siteId))) throw notFound('site');
}
