import type { z } from 'zod';
import { InvalidRequest, notFound, type ErrorDetail } from '../errors.ts';

/** zod issues as the `details` of a 400 `invalid_request`: `[{path, message}]`. */
export function issuesToDetails(error: z.ZodError): ErrorDetail[] {
  return error.issues.map((issue) => ({
    path: issue.path.length ? issue.path.join('.') : '(root)',
    message: issue.message,
  }));
}

/** What a value must be, for a person: "a string", "an integer", "a list". */
function kindOf(expected: string): string {
  const names: Record<string, string> = {
    string: 'a string',
    number: 'a number',
    int: 'an integer',
    boolean: 'true or false',
    array: 'a list',
    object: 'an object',
    null: 'null',
  };
  return names[expected] ?? expected;
}

/** The unit of a size limit: characters of a string, items of a list, a date's time. */
function sized(origin: string, n: number | bigint): string {
  if (origin === 'string') return `${n} character${Number(n) === 1 ? '' : 's'}`;
  if (origin === 'array' || origin === 'set') return `${n} item${Number(n) === 1 ? '' : 's'}`;
  if (origin === 'date') return new Date(Number(n)).toISOString();
  return String(n);
}

/** A literal as JSON shows it; a bigint (which JSON cannot hold) as its digits. */
function literal(v: unknown): string {
  return typeof v === 'bigint' ? v.toString() : JSON.stringify(v);
}

/**
 * zod's messages in the words the API's other messages use ("must not be empty", not "Too small:
 * expected string to have >=1 characters"), for API users and the dashboard's forms alike; a
 * schema's own messages (refinements) are kept.
 */
function friendlyIssue(issue: z.core.$ZodRawIssue): string | undefined {
  switch (issue.code) {
    case 'invalid_type':
      if (issue.input === undefined) return 'required';
      return `must be ${kindOf(issue.expected)}`;
    case 'too_small': {
      const min = issue.minimum;
      const size = sized(issue.origin, min);
      if (issue.exact) return `must be exactly ${size}`;
      const sizedOrigin = issue.origin === 'string' || issue.origin === 'array' || issue.origin === 'set';
      if (sizedOrigin && Number(min) === 1) return 'must not be empty';
      return issue.inclusive === false ? `must be more than ${size}` : `must be at least ${size}`;
    }
    case 'too_big': {
      const size = sized(issue.origin, issue.maximum);
      if (issue.exact) return `must be exactly ${size}`;
      return issue.inclusive === false ? `must be less than ${size}` : `must be at most ${size}`;
    }
    case 'invalid_format':
      if (issue.format === 'email') return 'must be an e-mail address';
      if (issue.format === 'url') return 'must be a URL';
      return undefined;
    case 'unrecognized_keys':
      return `unknown field${issue.keys.length === 1 ? '' : 's'}: ${issue.keys.join(', ')}`;
    case 'invalid_value':
      return issue.values.length === 1
        ? `must be ${literal(issue.values[0])}`
        : `must be one of ${issue.values.map(literal).join(', ')}`;
    default:
      return undefined;
  }
}

/** Parses a body or query with its schema; failure is 400 `invalid_request` with details. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, what = 'request'): z.output<S> {
  const result = schema.safeParse(input ?? {}, { error: friendlyIssue });
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
