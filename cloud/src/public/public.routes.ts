import type { Request } from 'express';
import { z } from 'zod';
import type { Config } from '../config.ts';
import { InvalidRequest, notFound, RateLimited } from '../errors.ts';
import { param } from '../http/context.ts';
import type { Reply, RouteDef } from '../http/route-table.ts';
import { parseInput } from '../http/validate.ts';
import type { RateLimiter } from '../limits/rate-limiter.ts';
import { METRICS, parseBbox, RANGES, type CachedAnswer, type PublicListing } from './public.listing.ts';
import { PIN_KINDS } from './public.repository.ts';
import { REASON_MAX, type PublicService } from './public.service.ts';
import { addressBudget } from '../http/client-address.ts';

/** Flags per client address per hour. */
export const FLAGS_PER_HOUR = 10;

/**
 * Browsers and proxies may keep answers but ask again each time (`no-cache`); the ETag makes the
 * question cheap (304). Nothing that stopped being public is shown from a cache.
 */
export const PUBLIC_CACHE_CONTROL = 'public, no-cache';

const SensorsQuery = z.object({
  bbox: z.string().optional(),
  kind: z.enum(PIN_KINDS).optional(),
});
const ReadingsQuery = z.object({ range: z.enum(Object.keys(RANGES) as ['24h', '7d', '30d']).default('24h') });
const LeaderboardQuery = z.object({ metric: z.enum(METRICS) });
const FlagBody = z.strictObject({
  reason: z
    .string()
    .refine((s) => s.length > 0 && [...s].length <= REASON_MAX, `must be 1 to ${REASON_MAX} characters`),
});

/** What these routes use; the composition root passes them in. */
export interface PublicRoutesDeps {
  config: Config;
  rateLimiter: RateLimiter;
  publicListing: PublicListing;
  publicApi: Pick<PublicService, 'flag'>;
}

/** 200 with the cached JSON and its ETag, or 304 when the client has that ETag already. */
function answer(req: Request, a: CachedAnswer): Reply {
  const headers = { ETag: a.etag, 'Cache-Control': PUBLIC_CACHE_CONTROL };
  const known = req.get('If-None-Match');
  if (known !== undefined && (known.trim() === '*' || known.split(',').some((t) => t.trim() === a.etag)))
    return { status: 304, headers };
  return { status: 200, body: null, json: a.json, headers };
}

/**
 * The public community API (docs/api/public.md): no authentication, on the same listener as `/v1`.
 * CORS, the per-address limit and preflights are answered by `publicApiEdge` before these run.
 */
export function publicRoutes(s: PublicRoutesDeps): RouteDef[] {
  const { publicListing } = s;
  return [
    {
      method: 'get',
      path: '/api/public/stats',
      auth: 'none',
      summary: 'Counts of public sensors, locations and organisations, and the latest reading time',
      success: { status: 200, description: '{sensors, locations, orgs, lastUpdate}' },
      handler: async (req) => answer(req, await publicListing.stats()),
    },
    {
      method: 'get',
      path: '/api/public/sensors',
      auth: 'none',
      summary: 'Public sensor pins inside bbox=south,west,north,east (all without one), of one kind if given',
      query: SensorsQuery,
      success: {
        status: 200,
        description: 'array of pins {id, lat, lon, kind, unit, value, ts, nickname, locationName, label}',
      },
      errors: ['invalid_bbox', 'invalid_request'],
      handler: async (req) => {
        const raw = req.query.bbox;
        const bbox = raw === undefined ? null : typeof raw === 'string' ? parseBbox(raw) : null;
        if (raw !== undefined && bbox === null) {
          throw new InvalidRequest(
            'invalid_bbox',
            'bbox must be south,west,north,east in degrees (latitudes -90..90, longitudes -180..180, south <= north)',
          );
        }
        const q = parseInput(SensorsQuery, req.query, 'query');
        return answer(req, await publicListing.sensors(bbox, q.kind ?? null));
      },
    },
    {
      method: 'get',
      path: '/api/public/sensors/:sensor_id',
      auth: 'none',
      summary: 'One public sensor: the pin with model, vendor and organisation',
      success: { status: 200, description: 'the pin fields plus model, vendor, organisation' },
      errors: ['sensor_not_found'],
      handler: async (req) => answer(req, await publicListing.sensor(param(req, 'sensor_id'))),
    },
    {
      method: 'get',
      path: '/api/public/sensors/:sensor_id/readings',
      auth: 'none',
      summary: 'Mean readings of a public sensor: 24h in 5 min buckets, 7d in 1 h, 30d in 6 h',
      query: ReadingsQuery,
      success: { status: 200, description: 'array of {ts, value}, ts the bucket start, oldest first' },
      errors: ['sensor_not_found', 'invalid_request'],
      handler: async (req) => {
        const id = param(req, 'sensor_id');
        if (!(await publicListing.exists(id))) throw notFound('sensor');
        const q = parseInput(ReadingsQuery, req.query, 'query');
        return answer(req, await publicListing.readings(id, q.range));
      },
    },
    {
      method: 'get',
      path: '/api/public/leaderboards',
      auth: 'none',
      summary: 'Top 50 public sensors by metric',
      query: LeaderboardQuery,
      success: { status: 200, description: 'array of pins with rank (from 1) and metric (a number)' },
      errors: ['invalid_request'],
      handler: async (req) => {
        const q = parseInput(LeaderboardQuery, req.query, 'query');
        return answer(req, await publicListing.leaderboard(q.metric));
      },
    },
    {
      method: 'post',
      path: '/api/public/sensors/:sensor_id/report',
      auth: 'none',
      summary: 'Flag a public sensor for an operator to review (10 per client address per hour)',
      requestBody: FlagBody,
      success: { status: 202, description: '{status: "received"}' },
      errors: ['sensor_not_found', 'invalid_request', 'rate_limited'],
      handler: async (req) => {
        const address = req.ip ?? 'unknown';
        const limit = await s.rateLimiter.hit(`public-flag:${addressBudget(address)}`, FLAGS_PER_HOUR, 3600);
        if (!limit.allowed && s.config.rateLimitMode === 'enforce') {
          throw new RateLimited(limit.retryAfterSeconds, `at most ${FLAGS_PER_HOUR} reports an hour`);
        }
        const id = param(req, 'sensor_id');
        if (!(await publicListing.exists(id))) throw notFound('sensor');
        const body = parseInput(FlagBody, req.body, 'body');
        await s.publicApi.flag(id, body.reason, address);
        return { status: 202, body: { status: 'received' } };
      },
    },
  ];
}
