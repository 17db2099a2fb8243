/**
 * The closed set of errors the service answers with (docs/api.md). Services throw these;
 * the HTTP edge turns them into `{error: {code, message, request_id}}` in one place
 * (`http/error-handler.ts`), and the MQTT edge into PUBACK reason codes.
 */
export interface ErrorDetail {
  path: string;
  message: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** 400: the request cannot be read or does not have the required shape. */
export class InvalidRequest extends ApiError {
  constructor(code: string, message: string, details?: ErrorDetail[]) {
    super(400, code, message, details);
  }
}

/** 401: missing (`auth_required`) or wrong (`token_invalid`, `code_invalid`) credentials. */
export class Unauthenticated extends ApiError {
  constructor(code: 'auth_required' | 'token_invalid' | 'code_invalid', message: string) {
    super(401, code, message);
  }
}

/** 403: credentials are right but do not reach this (`forbidden`, `device_not_in_token`). */
export class Forbidden extends ApiError {
  constructor(code: 'forbidden' | 'device_not_in_token', message: string) {
    super(403, code, message);
  }
}

/** 404: absent for this account; a foreign resource is never 403 (no existence oracle). */
export class NotFound extends ApiError {
  constructor(code: string, message: string) {
    super(404, code, message);
  }
}

export class Conflict extends ApiError {
  constructor(code: string, message: string) {
    super(409, code, message);
  }
}

/** 422: parsed, but semantically invalid. */
export class Unprocessable extends ApiError {
  constructor(code: string, message: string, details?: ErrorDetail[]) {
    super(422, code, message, details);
  }
}

/** 415: a body in a type the route does not read (only JSON is). */
export class UnsupportedMediaType extends ApiError {
  constructor() {
    super(415, 'unsupported_media_type', 'send the body as JSON with Content-Type: application/json');
  }
}

export class RateLimited extends ApiError {
  constructor(retryAfterSeconds: number, message = 'rate limit exceeded') {
    super(429, 'rate_limited', message, undefined, { 'Retry-After': String(retryAfterSeconds) });
  }
}

export class PayloadTooLarge extends ApiError {
  constructor(limitBytes: number) {
    super(413, 'payload_too_large', `request body is larger than ${limitBytes} bytes`);
  }
}

/** How long a client is told to wait after a 503 `db_unavailable` (a database restart takes seconds). */
export const DB_UNAVAILABLE_RETRY_SECONDS = 2;

/** `cause`: the error that showed the database down (for the log; never in the answer). */
export class DatabaseUnavailable extends ApiError {
  constructor(cause?: unknown) {
    super(503, 'db_unavailable', 'the database is unavailable; retry with backoff', undefined, {
      'Retry-After': String(DB_UNAVAILABLE_RETRY_SECONDS),
    });
    if (cause !== undefined) this.cause = cause;
  }
}

export function notFound(resource: string): NotFound {
  return new NotFound(`${resource}_not_found`, `${resource.replace(/_/g, ' ')} not found`);
}

/** The process takes no new work: it is stopping (draining for the balancer) or its schema is behind. */
export class NotReady extends ApiError {
  constructor(message: string) {
    super(503, 'not_ready', message);
  }
}

/** How long a client is told to wait after a 503 `overloaded`: ingest's queue drains in about that. */
export const OVERLOADED_RETRY_SECONDS = 1;

/**
 * 503: ingest is over its capacity and refused the request before doing any of its work; nothing of
 * it was stored (docs/design/ingest.md, "Admission control"). One shared instance: a shed request
 * is meant to cost next to nothing, and an Error's stack trace is the costliest part of making one.
 */
export class Overloaded extends ApiError {
  static readonly instance = new Overloaded();
  private constructor() {
    super(
      503,
      'overloaded',
      'ingest is over capacity; nothing was stored; retry after Retry-After seconds',
      undefined,
      {
        'Retry-After': String(OVERLOADED_RETRY_SECONDS),
      },
    );
  }
}
