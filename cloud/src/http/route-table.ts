import type { Express, Request, Response } from 'express';
import type { z } from 'zod';
import type { Config } from '../config.ts';
import {
  Conflict,
  Forbidden,
  InvalidRequest,
  RateLimited,
  Unauthenticated,
  UnsupportedMediaType,
} from '../errors.ts';
import { fingerprint, MAX_IDEMPOTENCY_KEY_LENGTH, type IdempotencyStore } from '../limits/idempotency.ts';
import type { RateLimiter } from '../limits/rate-limiter.ts';
import type { Principal, Scope } from './context.ts';
import { deviceToken, readCookie, SESSION_COOKIE } from './credentials.ts';
import { errorBody, refuseNul, toApiError, type ErrorBody } from './error-handler.ts';

/**
 * Every endpoint is declared as data: method, path, who may call it and what it does. The pipeline
 * below runs the same steps for each, in the order docs/api.md fixes (401, 403, rate limit,
 * then the handler's 404/400/409/422), and tests enumerate the table so no route escapes them.
 */
export type AuthMode =
  /** no credentials (auth request/verify, public API) */
  | 'none'
  /** `Authorization: Bearer ua_live_…` */
  | 'user'
  /** a user token or the `os_session` cookie (only `POST /v1/tokens`) */
  | 'user-or-session'
  /** the `os_session` cookie only */
  | 'session'
  /** `Authorization: Bearer ds_live_…` (or `?token=` where `queryToken` is set) */
  | 'device';

export type RateFamily = 'mgmt' | 'read' | 'report' | 'ingest';

export interface Reply {
  status: number;
  body?: unknown;
  /** `body` serialised already, when the handler has it cheaper than JSON.stringify (ingest answers). */
  json?: string;
  headers?: Record<string, string>;
}

export interface RouteDef {
  method: 'get' | 'post' | 'patch' | 'put' | 'delete';
  path: string;
  auth: AuthMode;
  /** For user auth: the scope needed. Default: `read` for GET, `write` otherwise. */
  scope?: Scope;
  /** Rate-limit family. Default: `mgmt` for user routes, `ingest` for device routes, none otherwise. */
  family?: RateFamily | null;
  /**
   * Whose budget a user route spends: the account's (default), or the caller's own token or session
   * (what stopping a leaked token takes, which that token must not be able to spend for everyone).
   */
  rateSubject?: 'account' | 'credential';
  /** Device routes: the token may come as the `token` query parameter (Shelly GET only). */
  queryToken?: boolean;
  /**
   * The handler authenticates and rate-limits inside its own unit of work (ingest does, to commit
   * the counter with the data). The pipeline still does both when an Idempotency-Key is sent.
   */
  inlineAuth?: boolean;
  /** `json` (default): the body is parsed after authentication; `raw`: left in `req.ctx.rawBody`. */
  body?: 'json' | 'raw';
  summary: string;
  /** For the OpenAPI document (`/v1/openapi.json`): the query and body schemas the handler parses with. */
  query?: z.ZodType;
  requestBody?: z.ZodType;
  /** For the OpenAPI document: the success status and what it answers. */
  success?: { status: number; description: string };
  /** For the OpenAPI document: the error codes this route can answer beyond auth, scope and rate limits. */
  errors?: string[];
  /**
   * The success answer holds a secret shown once (a token, a private key). Secrets are never stored
   * in plaintext, so the Idempotency-Key cache keeps only the fact that the request succeeded, and a
   * replay is refused with 409 `idempotency_secret_withheld`.
   */
  secretInResponse?: boolean;
  /**
   * A route of the dashboard's private surface under `/app/api` (docs/api/dashboard.md): a
   * state-changing request must carry `X-Requested-With: XMLHttpRequest` (403 `forbidden`, checked
   * before anything else), and the session cookie is checked against cross-site use even when an
   * `Authorization` header is sent (the surface never reads one).
   */
  dashboard?: boolean;
  /** Answers with a Reply, or writes the response itself (streams) and returns undefined. */
  handler: (req: Request, res: Response) => Promise<Reply | undefined>;
}

const SCOPE_RANK: Record<Scope, number> = { read: 0, write: 1, admin: 2 };

const FAMILY_HEADER: Record<RateFamily, string> = {
  mgmt: 'X-RateLimit-Mgmt',
  read: 'X-RateLimit-Read',
  report: 'X-RateLimit-Report',
  ingest: 'X-RateLimit-Device',
};

/**
 * Who is calling, as the pipeline asks it: the auth resource implements it (`auth/authenticator.ts`),
 * and the composition root passes it in. Each throws the 401 or 403 its credential deserves.
 */
export interface CallerAuthenticator {
  /** A user token from the `Authorization` header. */
  user(authorization: string | undefined): Promise<Principal>;
  /** A device token (from the header or, where allowed, the query), or null when none was sent. */
  device(token: string | null): Promise<Principal>;
  /** The session behind the `Cookie` header (rolled forward) and what is left of it, or null. */
  session(
    cookieHeader: string | undefined,
  ): Promise<{ principal: Principal; remainingMicros: number } | null>;
}

export interface PipelineDeps {
  config: Config;
  authenticator: CallerAuthenticator;
  /** The `Set-Cookie` value that refreshes a session cookie for what is left of the session. */
  sessionCookie: (secret: string, remainingMicros: number) => string;
  rateLimiter: RateLimiter;
  idempotency: IdempotencyStore;
}

export function requiredScope(route: RouteDef): Scope {
  return route.scope ?? (route.method === 'get' ? 'read' : 'write');
}

export function rateFamily(route: RouteDef): RateFamily | null {
  if (route.family !== undefined) return route.family;
  if (route.auth === 'device') return 'ingest';
  if (route.auth === 'none' || route.auth === 'session') return null;
  return 'mgmt';
}

export function mountRoutes(app: Express, routes: readonly RouteDef[], deps: PipelineDeps): void {
  for (const route of routes) {
    app[route.method](route.path, async (req: Request, res: Response) => {
      if (route.method !== 'get') {
        if (route.dashboard) requireRequestedWith(req);
        refuseCrossSiteCookie(req, deps.config, route.dashboard === true);
      }
      const inline = route.inlineAuth === true && req.get('Idempotency-Key') === undefined;
      if (!inline) {
        req.ctx.principal = await authenticate(route, req, res, deps);
        await applyRateLimit(route, req, res, deps);
        if (route.body !== 'raw') {
          if (route.auth !== 'device') requireJsonContentType(req);
          req.body = parseJsonBody(req);
        }
        refuseNul({
          params: req.params,
          query: req.query,
          body: route.body === 'raw' ? undefined : req.body,
        });
      }
      await runWithIdempotency(route, req, res, deps);
    });
  }
}

/**
 * A state-changing request that carries the session cookie must come from the cloud's own pages:
 * a browser sends the cookie with requests from any page of the same site (SameSite=Lax), sibling
 * subdomains included, so the request's `Sec-Fetch-Site` and `Origin` (sent by browsers on every
 * such request) must not name another origin. Requests with a bearer token, and clients that send
 * neither header (scripts with a cookie), are not browsers' cross-site requests.
 */
function refuseCrossSiteCookie(req: Request, config: Config, dashboard: boolean): void {
  if (req.headers.authorization !== undefined && !dashboard) return;
  if (readCookie(req.headers.cookie, SESSION_COOKIE) === null) return;
  const site = req.get('Sec-Fetch-Site');
  if (site !== undefined && site !== 'same-origin' && site !== 'none') {
    throw new Forbidden(
      'forbidden',
      `a request from another site (Sec-Fetch-Site: ${site}) cannot use the session`,
    );
  }
  const origin = req.get('Origin');
  if (origin !== undefined && !isOwnOrigin(req, config, origin)) {
    throw new Forbidden('forbidden', `a request from ${origin} cannot use the session`);
  }
}

/**
 * The dashboard's own requests say so with `X-Requested-With: XMLHttpRequest`: a header no HTML
 * form sets, and one a foreign page's script cannot add without a CORS preflight the cloud never
 * grants. Every state-changing `/app/api` request needs it, the sign-in routes included.
 */
function requireRequestedWith(req: Request): void {
  if (req.get('X-Requested-With')?.toLowerCase() === 'xmlhttprequest') return;
  throw new Forbidden(
    'forbidden',
    'a state-changing /app/api request needs the header X-Requested-With: XMLHttpRequest',
  );
}

/**
 * The dashboard's `/app/api` table, derived from the `/v1` one: every route a signed-in person may
 * call (management routes and the sign-in routes under `/v1/auth/`), at the same path after the
 * prefix, with the same handler, validation and rate-limit family. The session cookie is the only
 * credential (a session acts with the admin scope for its own account); device routes, the
 * OpenAPI document and anything outside `/v1` are not served there.
 */
export function dashboardRoutes(v1: readonly RouteDef[]): RouteDef[] {
  return v1.filter(isDashboardRoute).map((route) => ({
    ...route,
    path: `${DASHBOARD_API_PREFIX}${route.path.slice('/v1'.length)}`,
    auth: route.auth === 'none' ? 'none' : 'session',
    family: rateFamily(route),
    dashboard: true,
  }));
}

/** Where the dashboard's JSON endpoints live. */
export const DASHBOARD_API_PREFIX = '/app/api';

function isDashboardRoute(route: RouteDef): boolean {
  if (!route.path.startsWith('/v1/')) return false;
  switch (route.auth) {
    case 'user':
    case 'user-or-session':
    case 'session':
      return true;
    case 'none':
      return route.path.startsWith('/v1/auth/');
    case 'device':
      return false;
  }
}

/** The origin the request was addressed to (through trusted proxies, as they name it). */
function ownOrigin(req: Request): string | null {
  const host = req.get('Host');
  return host ? `${req.protocol}://${host}` : null;
}

/** Whether `origin` is the cloud's own: BASE_URL's, or the one the request was addressed to. */
export function isOwnOrigin(req: Request, config: Config, origin: string): boolean {
  return origin === new URL(config.baseUrl).origin || origin === ownOrigin(req);
}

/**
 * A body is JSON only with a JSON content type: a form or `text/plain` body is what a foreign page
 * can make a browser send without asking (no CORS preflight). Device routes keep accepting any type,
 * as small devices often send none; they authenticate with a bearer token only.
 */
function requireJsonContentType(req: Request): void {
  if (!req.ctx.rawBody || req.ctx.rawBody.length === 0) return;
  if (req.is(['application/json', '+json'])) return;
  throw new UnsupportedMediaType();
}

/** The request body as JSON: undefined when empty, 400 `bad_json` when it does not parse. */
export function parseJsonBody(req: Request): unknown {
  return parseJson(req.ctx.rawBody);
}

/** A raw body as JSON: undefined when empty, 400 `bad_json` when it does not parse. */
export function parseJson(raw: Buffer | null): unknown {
  if (!raw || raw.length === 0) return undefined;
  try {
    return JSON.parse(raw.toString('utf8')) as unknown;
  } catch {
    throw new InvalidRequest('bad_json', 'the body is not valid JSON');
  }
}

async function authenticate(
  route: RouteDef,
  req: Request,
  res: Response,
  deps: PipelineDeps,
): Promise<Principal | null> {
  const { authenticator } = deps;
  switch (route.auth) {
    case 'none':
      return null;
    case 'device': {
      return authenticator.device(
        deviceToken(req.headers.authorization, req.query.token, route.queryToken === true),
      );
    }
    case 'session': {
      const session = await sessionOf(req, res, deps);
      if (!session)
        throw new Unauthenticated('auth_required', 'sign in first: this needs the os_session cookie');
      return session;
    }
    case 'user-or-session': {
      if (req.headers.authorization === undefined) {
        const session = await sessionOf(req, res, deps);
        if (session) return session;
      }
      return checkScope(route, await authenticator.user(req.headers.authorization));
    }
    case 'user':
      return checkScope(route, await authenticator.user(req.headers.authorization));
  }
}

/** The cookie's session; every request with it extends the session, so the cookie is sent again. */
async function sessionOf(req: Request, res: Response, deps: PipelineDeps): Promise<Principal | null> {
  const session = await deps.authenticator.session(req.headers.cookie);
  if (!session) return null;
  const secret = readCookie(req.headers.cookie, SESSION_COOKIE)!;
  res.append('Set-Cookie', deps.sessionCookie(secret, session.remainingMicros));
  return session.principal;
}

function checkScope(route: RouteDef, principal: Principal): Principal {
  const needed = requiredScope(route);
  if (principal.kind === 'device') throw new Forbidden('forbidden', 'a device token cannot do this');
  if (SCOPE_RANK[principal.scope] < SCOPE_RANK[needed]) {
    throw new Forbidden(
      'forbidden',
      `this needs a token with the ${needed} scope; yours has ${principal.scope}`,
    );
  }
  return principal;
}

async function applyRateLimit(
  route: RouteDef,
  req: Request,
  res: Response,
  deps: PipelineDeps,
): Promise<void> {
  const family = rateFamily(route);
  const principal = req.ctx.principal;
  if (!family || !principal) return;
  const { rateLimits } = deps.config;
  const limit = {
    mgmt: rateLimits.mgmtPerMin,
    read: rateLimits.readPerMin,
    report: rateLimits.reportPerMin,
    ingest: rateLimits.ingestPerMin,
  }[family];
  const subject =
    principal.kind === 'device'
      ? principal.deviceId
      : route.rateSubject !== 'credential'
        ? principal.accountId
        : principal.kind === 'user'
          ? principal.tokenId
          : principal.sessionId;
  const result = await deps.rateLimiter.hit(`${family}:${subject}`, limit);
  res.set({
    [FAMILY_HEADER[family]]: String(limit),
    'X-RateLimit-Remaining': String(result.remaining),
    'X-RateLimit-Reset': String(result.resetAt),
  });
  if (result.allowed) return;
  if (deps.config.rateLimitMode === 'enforce') throw new RateLimited(result.retryAfterSeconds);
  req.ctx.log.warn({ family, subject, limit }, 'rate limit exceeded (warn mode: served anyway)');
}

/** `Idempotency-Key` on every mutating route: replay the first answer, 409 on a different body. */
async function runWithIdempotency(
  route: RouteDef,
  req: Request,
  res: Response,
  deps: PipelineDeps,
): Promise<void> {
  const key = req.get('Idempotency-Key');
  const principal = req.ctx.principal;
  if (route.method === 'get' || key === undefined || !principal) {
    send(res, await route.handler(req, res), route);
    return;
  }
  if (key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
    throw new InvalidRequest(
      'invalid_request',
      `Idempotency-Key must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters`,
      [{ path: 'Idempotency-Key', message: 'too long' }],
    );
  }
  const scope =
    principal.kind === 'device' ? `device:${principal.deviceId}` : `account:${principal.accountId}`;
  const print = fingerprint(route.method, req.originalUrl.split('?')[0]!, req.ctx.rawBody);
  const begun = await deps.idempotency.begin(scope, key, print);
  if (begun.kind === 'conflict') {
    throw new Conflict('idempotency_conflict', 'this Idempotency-Key was used with a different request');
  }
  if (begun.kind === 'in_progress') {
    throw new Conflict(
      'idempotency_conflict',
      'a request with this Idempotency-Key is still being processed',
    );
  }
  if (begun.kind === 'replay' && isWithheld(begun.body)) {
    throw new Conflict(
      'idempotency_secret_withheld',
      'the request with this Idempotency-Key succeeded, and its answer held a secret that is shown only once; it is not replayed',
    );
  }
  if (begun.kind === 'replay') {
    res.set('Idempotent-Replayed', 'true');
    send(res, { status: begun.status, body: withRequestId(begun.status, begun.body, req.ctx.requestId) });
    return;
  }
  // Recording the answer is the last step: when it fails, the client still gets the answer of what
  // was done (a 503 would tell it to retry a change already made), and the key's claim lapses.
  const record = async (write: () => Promise<void>) => {
    try {
      await write();
    } catch (err) {
      req.ctx.log.error({ err }, 'Idempotency-Key: the answer could not be recorded; the claim will lapse');
    }
  };
  let reply: Reply | undefined;
  try {
    reply = await route.handler(req, res);
  } catch (err) {
    const apiError = toApiError(err);
    if (apiError.status >= 500 || apiError.status === 429)
      await record(() => deps.idempotency.release(scope, key));
    else
      await record(() =>
        deps.idempotency.complete(scope, key, apiError.status, errorBody(apiError, req.ctx.requestId)),
      );
    throw err;
  }
  const answered = reply;
  if (!answered || answered.status >= 500) await record(() => deps.idempotency.release(scope, key));
  else if (route.secretInResponse && answered.status < 300)
    await record(() => deps.idempotency.complete(scope, key, answered.status, WITHHELD));
  else await record(() => deps.idempotency.complete(scope, key, answered.status, answered.body ?? null));
  send(res, reply, route);
}

const WITHHELD = { secret_withheld: true };

function isWithheld(body: unknown): boolean {
  return (
    typeof body === 'object' &&
    body !== null &&
    (body as { secret_withheld?: unknown }).secret_withheld === true
  );
}

/**
 * A replayed error carries this request's id, like its `X-Request-Id` (docs/api.md); the
 * status, code and message are the first answer's.
 */
function withRequestId(status: number, body: unknown, requestId: string): unknown {
  const error = status >= 400 ? (body as Partial<ErrorBody> | null)?.error : undefined;
  return error ? { ...(body as ErrorBody), error: { ...error, request_id: requestId } } : body;
}

function send(res: Response, reply: Reply | undefined, route?: RouteDef): void {
  if (!reply) return; // the handler wrote the response itself
  // A secret shown once must not stay in a browser's or a proxy's cache.
  if (route?.secretInResponse) res.set('Cache-Control', 'no-store');
  if (reply.headers) res.set(reply.headers);
  if (reply.body === undefined || reply.status === 204) res.status(reply.status).end();
  else if (reply.json !== undefined) res.status(reply.status).type('json').send(reply.json);
  else res.status(reply.status).json(reply.body);
}
