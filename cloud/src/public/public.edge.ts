import type { RequestHandler } from 'express';
import type { Config } from '../config.ts';
import { RateLimited } from '../errors.ts';
import type { RateLimiter } from '../limits/rate-limiter.ts';
import { addressBudget } from '../http/client-address.ts';

/**
 * What every answer under `/api/public` gets before its route runs, errors included: CORS for any
 * origin (preflights answered here), and the limit per client address (RATE_LIMIT_PUBLIC_PER_MIN,
 * 600 a minute by default as the spec's Limits say), the address as `TRUST_PROXY` lets
 * `X-Forwarded-For` name it (`req.ip`).
 */
export function publicApiEdge(deps: { config: Config; rateLimiter: RateLimiter }): RequestHandler {
  return async (req, res, next) => {
    res.set({
      'Access-Control-Allow-Origin': '*',
      'Access-Control-Expose-Headers':
        'ETag, Retry-After, X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset',
    });
    if (req.method === 'OPTIONS') {
      res.set({
        'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
        'Access-Control-Allow-Headers': 'Content-Type, If-None-Match',
        'Access-Control-Max-Age': '86400',
      });
      res.status(204).end();
      return;
    }
    const address = req.ip ?? 'unknown';
    const limit = deps.config.rateLimits.publicPerMin;
    const result = await deps.rateLimiter.hit(`public:${addressBudget(address)}`, limit);
    res.set({
      'X-RateLimit-Limit': String(limit),
      'X-RateLimit-Remaining': String(result.remaining),
      'X-RateLimit-Reset': String(result.resetAt),
    });
    if (!result.allowed) {
      if (deps.config.rateLimitMode === 'enforce') throw new RateLimited(result.retryAfterSeconds);
      req.ctx.log.warn({ family: 'public', address }, 'rate limit exceeded (warn mode: served anyway)');
    }
    next();
  };
}
