import type { ErrorRequestHandler, RequestHandler } from 'express';
import { ApiError, DatabaseUnavailable, InvalidRequest, NotFound, PayloadTooLarge } from '../errors.ts';
import type { Logger } from '../logger.ts';
import { isConnectionError } from '../storage/database.ts';

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
  if (isConnectionError(err)) return new DatabaseUnavailable();
  return new ApiError(500, 'internal', 'internal error; safe to retry with backoff');
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

/** The one place an error becomes `{error: {code, message, request_id}}` (interface spec, "Errors"). */
export function errorHandler(log: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    const apiError = toApiError(err);
    const requestId = req.ctx?.requestId ?? 'req_unknown';
    if (apiError.status >= 500) (req.ctx?.log ?? log).error({ err }, 'request failed');
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (apiError.headers) res.set(apiError.headers);
    res.status(apiError.status).json(errorBody(apiError, requestId));
  };
}

export const notFoundHandler: RequestHandler = (req) => {
  throw new NotFound('not_found', `no route for ${req.method} ${req.path}`);
};
