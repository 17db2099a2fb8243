import express, { type Express, type Request } from 'express';
import { newId } from '../../shared/ids.ts';
import { sessionCookie } from './auth/cookie.ts';
import { trustProxy } from './http/client-address.ts';
import { BODY_LIMIT_BYTES, errorHandler, notFoundHandler } from './http/error-handler.ts';
import { logRequest } from './http/request-log.ts';
import { mountRoutes, type RouteDef } from './http/route-table.ts';
import type { Logger } from './logger.ts';
import { servePage, serveRoot } from './pages/pages.static.ts';
import { publicApiEdge } from './public/public.edge.ts';
import { allDashboardRoutes, allRoutes } from './routes.ts';
import type { Services } from './services.ts';

/**
 * The Express app: request id, access log, body limit, the route table (`/v1` and the dashboard's
 * `/app/api`), 404 and the error envelope.
 */
export function createApp(s: Services): { app: Express; routes: RouteDef[]; dashboardRoutes: RouteDef[] } {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.set('trust proxy', trustProxy(s.config));

  app.use((req, res, next) => {
    const requestId = newId('req');
    let log: Logger | null = null;
    req.ctx = {
      requestId,
      // The request's child logger is made on first use: most requests log one line only.
      get log() {
        return (log ??= s.log.child({ req_id: requestId }));
      },
      principal: null,
      rawBody: null,
    };
    res.set({ 'X-Request-Id': requestId, 'X-Content-Type-Options': 'nosniff' });
    // Pages under /app carry magic-link tokens in their URLs: no Referer may take them elsewhere.
    // same-origin, not no-referrer: under no-referrer the Fetch standard lets a browser send
    // `Origin: null` on its own POSTs (WebKit's source reads so), which the cross-site check refuses.
    if (req.path.startsWith('/app')) res.set('Referrer-Policy', 'same-origin');
    const started = performance.now();
    res.on('finish', () => {
      logRequest(
        s.log,
        requestId,
        req.method,
        req.originalUrl,
        req.ip,
        res.statusCode,
        started,
        req.ctx.principal,
      );
      // The route's template, never the URL: ids in paths would make a series per resource.
      const route = (req.route as { path?: unknown } | undefined)?.path;
      s.metrics.observeRequest(
        typeof route === 'string' ? route : 'unmatched',
        req.method,
        res.statusCode,
        (performance.now() - started) / 1000,
      );
    });
    next();
  });

  // Bodies are read raw here and parsed by the route pipeline after authentication, so a request
  // with a bad token and a bad body is answered 401, not 400 (docs/api.md: 401, 403, 404, then 400).
  app.use(
    express.raw({
      limit: BODY_LIMIT_BYTES,
      type: () => true,
      verify: (req, _res, buf) => {
        (req as Request).ctx.rawBody = buf;
      },
    }),
  );

  // The public API: CORS and the per-address limit for every answer under it, unknown paths too.
  app.use('/api/public', publicApiEdge(s));

  const routes = allRoutes(s);
  const dashboardRoutes = allDashboardRoutes(s, routes);
  mountRoutes(app, [...routes, ...dashboardRoutes], {
    ...s,
    sessionCookie: (secret, remainingMicros) => sessionCookie(s.config, secret, remainingMicros),
  });
  // The dashboard's page answers every other path under /app; an unknown /app/api path is the JSON 404.
  serveRoot(app);
  servePage(app, 'app');
  servePage(app, 'map');
  app.use(notFoundHandler);
  app.use(errorHandler(s.log, s.dbOutage));
  return { app, routes, dashboardRoutes };
}
