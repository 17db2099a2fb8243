import type { IncomingMessage } from 'node:http';
import express, { type Express, type Request } from 'express';
import { newId } from '../../shared/ids.ts';
import { BODY_LIMIT_BYTES, errorHandler, notFoundHandler } from './http/error-handler.ts';
import { mountRoutes, type RouteDef } from './http/route-table.ts';
import { redactUrl } from './logger.ts';
import { allRoutes } from './routes.ts';
import type { Services } from './services.ts';

/** JSON bodies are parsed whatever their declared type, except binary ones (protobuf webhooks). */
function isJsonBody(req: IncomingMessage): boolean {
  const type = req.headers['content-type'] ?? '';
  return !/^(application\/octet-stream|application\/x-protobuf|multipart\/)/i.test(type);
}

/** The Express app: request id, access log, body limit, the route table, 404 and the error envelope. */
export function createApp(s: Services): { app: Express; routes: RouteDef[] } {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use((req, res, next) => {
    const requestId = newId('req');
    req.ctx = { requestId, log: s.log.child({ req_id: requestId }), principal: null, rawBody: null };
    res.set('X-Request-Id', requestId);
    const started = performance.now();
    res.on('finish', () => {
      const principal = req.ctx.principal;
      req.ctx.log.info(
        {
          method: req.method,
          url: redactUrl(req.originalUrl),
          status: res.statusCode,
          ms: Math.round((performance.now() - started) * 10) / 10,
          account_id: principal?.accountId,
          device_id: principal?.kind === 'device' ? principal.deviceId : undefined,
        },
        'request',
      );
    });
    next();
  });

  app.use(
    express.json({
      limit: BODY_LIMIT_BYTES,
      type: isJsonBody,
      strict: false,
      verify: (req, _res, buf) => {
        (req as Request).ctx.rawBody = buf;
      },
    }),
  );

  const routes = allRoutes(s);
  mountRoutes(app, routes, s);
  app.use(notFoundHandler);
  app.use(errorHandler(s.log));
  return { app, routes };
}
