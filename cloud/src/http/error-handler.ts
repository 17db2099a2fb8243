import { hasNul } from '../../../shared/ingest.ts';
import type { ErrorRequestHandler, RequestHandler } from 'express';
import {
  ApiError,
  DatabaseUnavailable,
  InvalidRequest,
  NotFound,
  Overloaded,
  PayloadTooLarge,
  Unprocessable,
  type ErrorDetail,
} from '../errors.ts';
import { redactUrl, type Logger } from '../logger.ts';
import { isConnectionError, isUnstorableText } from '../storage/database.ts';
import type { DatabaseOutageLog } from '../storage/outage-log.ts';

export const BODY_LIMIT_BYTES = 256 * 1024;

export interface ErrorBody {
  error: { code: string; message: string; request_id: string; details?: unknown };
}

/** Anything thrown, as the ApiError the client sees. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const type = (err as { type?: unknown } | null)?.type;
  if (type === 'entity.parse.failed') return new InvalidRequest('bad_json', 'the body is not valid JSON');
  if (type === 'entity.too.large') return new PayloadTooLarge(BODY_LIMIT_BYTES);
  if (type === 'encoding.unsupported' || type === 'charset.unsupported' || type === 'request.aborted') {
    return new InvalidRequest('bad_json', 'the body could not be read as UTF-8 JSON');
  }
  if (err instanceof URIError) {
    // The router could not decode a path segment (`/v1/sites/%E0%A4%A`).
    return new InvalidRequest('invalid_request', 'the path is not valid percent-encoding');
  }
  const status = (err as { status?: unknown } | null)?.status;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    // body-parser's other refusals: a body that does not decompress, an unknown encoding.
    if (status === 400)
      return new InvalidRequest('bad_json', 'the body could not be read: is Content-Encoding right?');
    return new ApiError(status, 'invalid_request', (err as Error).message);
  }
  if (isUnstorableText(err)) return nulRefused();
  if (isConnectionError(err)) return new DatabaseUnavailable(err);
  return new ApiError(500, 'internal', 'internal error; safe to retry with backoff');
}

function nulRefused(details?: ErrorDetail[]): Unprocessable {
  return new Unprocessable('invalid_characters', 'text must not contain U+0000 (NUL)', details);
}

/** How deep a client's JSON may nest: far beyond any schema of ours, far below the stack's limit. */
export const MAX_INPUT_DEPTH = 64;

/**
 * Refuses U+0000 anywhere in what a client sent (422 `invalid_characters`, naming each field): no
 * column of ours can hold it, and PostgreSQL's text type refuses it. Input nested deeper than
 * MAX_INPUT_DEPTH is refused first (400 `invalid_request`): walking it would exhaust the stack.
 */
export function refuseNul(inputs: Record<string, unknown>): void {
  const found: ErrorDetail[] = [];
  const walk = (value: unknown, path: string, depth = 0): void => {
    if (depth > MAX_INPUT_DEPTH && typeof value === 'object' && value !== null) {
      throw new InvalidRequest('invalid_request', `the input nests deeper than ${MAX_INPUT_DEPTH} levels`);
    }
    if (typeof value === 'string') {
      if (hasNul(value)) found.push({ path: path || '(root)', message: 'must not contain U+0000 (NUL)' });
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => walk(v, `${path}[${i}]`, depth + 1));
    } else if (typeof value === 'object' && value !== null) {
      for (const [k, v] of Object.entries(value)) {
        const at = path ? `${path}.${k}` : k;
        if (hasNul(k)) found.push({ path: at, message: 'must not contain U+0000 (NUL)' });
        walk(v, at, depth + 1);
      }
    }
  };
  for (const input of Object.values(inputs)) walk(input, '');
  if (found.length > 0) throw nulRefused(found);
}

export function errorBody(err: ApiError, requestId: string): ErrorBody {
  return {
    error: {
      code: err.code,
      message: err.message,
      request_id: requestId,
      ...(err.details ? { details: err.details } : {}),
    },
  };
}

/**
 * Logs a 5xx answer: a 503 `db_unavailable` goes to the outage log (one line per outage, each
 * refusal at debug level), a 503 `overloaded` or `not_ready` to no line of its own, any other 5xx is
 * a line at error level.
 */
export function logServerError(
  log: Logger,
  dbOutage: DatabaseOutageLog | undefined,
  err: unknown,
  apiError: ApiError,
  requestId: string,
): void {
  // Shed requests are counted and logged by ingest (one line when shedding starts, one when it ends).
  // A 503 `not_ready` is /readyz telling the balancer the process drains or waits for a migration:
  // an answer it asks for every few seconds, in the access log, not an error.
  if (apiError.status < 500 || apiError === Overloaded.instance || apiError.code === 'not_ready') return;
  if (dbOutage && apiError.code === 'db_unavailable') {
    dbOutage.refused('request', apiError === err ? (apiError.cause ?? err) : err, { req_id: requestId });
  } else log.error({ err }, 'request failed');
}

/** The one place an error becomes `{error: {code, message, request_id}}` (docs/api.md). */
export function errorHandler(log: Logger, dbOutage?: DatabaseOutageLog): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    const apiError = toApiError(err);
    const requestId = req.ctx?.requestId ?? 'req_unknown';
    logServerError(req.ctx?.log ?? log, dbOutage, err, apiError, requestId);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (apiError.headers) res.set(apiError.headers);
    res.status(apiError.status).json(errorBody(apiError, requestId));
  };
}

/** The path is echoed with any secret in it redacted: a token pasted into a URL is not handed back. */
export const notFoundHandler: RequestHandler = (req) => {
  throw new NotFound('not_found', `no route for ${req.method} ${redactUrl(req.path)}`);
};
