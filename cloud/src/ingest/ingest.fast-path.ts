import type { IncomingMessage, ServerResponse } from 'node:http';
import querystring from 'node:querystring';
import { newId } from '../../../shared/ids.ts';
import type { Config } from '../config.ts';
import { Overloaded, PayloadTooLarge, type ApiError } from '../errors.ts';
import { clientAddress, trustProxy, type TrustProxy } from '../http/client-address.ts';
import type { Principal } from '../http/context.ts';
import { bearerToken } from '../http/credentials.ts';
import { BODY_LIMIT_BYTES, errorBody, logServerError, toApiError } from '../http/error-handler.ts';
import { logRequest } from '../http/request-log.ts';
import type { Reply } from '../http/route-table.ts';
import type { Logger } from '../logger.ts';
import type { DatabaseOutageLog } from '../storage/outage-log.ts';
import { ingestHandlers, type IngestExchange, type IngestHandlerDeps } from './ingest.handlers.ts';

/**
 * The device ingest routes served straight from Node's HTTP server, in front of Express.
 *
 * Express costs several times the CPU of Node's own HTTP handling per request (router, request
 * and response decoration, body parser, `res.json`; docs/design/ingest.md, "Alternatives rejected",
 * measured with `BENCH_ONLY=ingest npm run bench`). Devices send the bulk of all
 * requests, so their two routes take this path; it runs the same steps as the Express pipeline
 * (request id, access log, 256 KiB body limit, the same handlers and error envelope), and anything
 * it does not handle exactly as Express would goes to Express instead: an Idempotency-Key (the
 * pipeline's cache), a compressed body, another method or path spelling.
 * `test/cloud/ingest/fast-path.test.ts` checks both answer alike.
 */
export function ingestFastPath(
  s: IngestHandlerDeps & {
    log: Logger;
    config: Config;
    metrics?: RequestObserver;
    dbOutage?: DatabaseOutageLog;
  },
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const handlers = ingestHandlers(s);
  const trust = trustProxy(s.config);
  const serve = (
    route: string,
    req: IncomingMessage,
    res: ServerResponse,
    log: Logger,
    trust: TrustProxy,
    handler: (x: IngestExchange) => Promise<Reply>,
    input: { body: boolean; query: Record<string, unknown>; shed?: boolean },
  ) => serveExchange(req, res, log, trust, handler, input, route, s.metrics, s.dbOutage);
  /**
   * Admission control at the door: over capacity, a device's request is answered 503 `overloaded`
   * before its body is read, its token hashed or its JSON parsed (Node discards the unread body and
   * keeps the connection). The handlers ask again once the body is in.
   */
  const shedding = (way: 'http' | 'shelly') => {
    if (!s.ingest.overloaded()) return false;
    s.ingest.shed({ way, measurements: [] });
    return true;
  };
  return (req, res) => {
    const url = req.url ?? '';
    if (req.headers['idempotency-key'] !== undefined) return false;
    if (req.method === 'POST' && url === '/v1/ingest') {
      const encoding = req.headers['content-encoding'];
      if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return false;
      serve('/v1/ingest', req, res, s.log, trust, (x) => handlers.post(x), {
        body: true,
        query: {},
        shed: shedding('http'),
      });
      return true;
    }
    const hooks = s.integrationWebhooks;
    if (
      hooks &&
      req.method === 'POST' &&
      (url === '/v1/webhooks/ttn' || url.startsWith('/v1/webhooks/chirpstack?'))
    ) {
      const encoding = req.headers['content-encoding'];
      if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return false;
      const q = url.indexOf('?');
      const query = q < 0 ? {} : (querystring.parse(url.slice(q + 1)) as Record<string, unknown>);
      if (typeof query.event === 'string' && query.event.includes('\u0000')) return false;
      serve(
        q < 0 ? '/v1/webhooks/ttn' : '/v1/webhooks/chirpstack',
        req,
        res,
        s.log,
        trust,
        (x) =>
          q < 0
            ? hooks.ttn(bearerToken(x.header('authorization')), x.rawBody, x.log)
            : hooks.chirpstack(
                bearerToken(x.header('authorization')),
                query.event,
                x.header('content-type'),
                x.rawBody,
                x.log,
              ),
        { body: true, query },
      );
      return true;
    }
    if (req.method === 'GET' && (url === '/v1/ingest/shelly' || url.startsWith('/v1/ingest/shelly?'))) {
      const q = url.indexOf('?');
      const query = q < 0 ? {} : (querystring.parse(url.slice(q + 1)) as Record<string, unknown>);
      serve('/v1/ingest/shelly', req, res, s.log, trust, (x) => handlers.shelly(x), {
        body: false,
        query,
        shed: shedding('shelly'),
      });
      return true;
    }
    return false;
  };
}

/** Counts a request answered here, under the template Express would name it by. */
interface RequestObserver {
  observeRequest(route: string, method: string, status: number, seconds: number): void;
}

function serveExchange(
  req: IncomingMessage,
  res: ServerResponse,
  log: Logger,
  trust: TrustProxy,
  handler: (x: IngestExchange) => Promise<Reply>,
  input: { body: boolean; query: Record<string, unknown>; shed?: boolean },
  route: string,
  metrics: RequestObserver | undefined,
  dbOutage: DatabaseOutageLog | undefined,
): void {
  const requestId = newId('req');
  const started = performance.now();
  const headers: Record<string, string> = { 'X-Request-Id': requestId, 'X-Content-Type-Options': 'nosniff' };
  const exchange: IngestExchange = {
    rawBody: null,
    query: input.query,
    header: (name) => {
      const value = req.headers[name];
      return Array.isArray(value) ? value.join(', ') : value;
    },
    principal: null as Principal | null,
    setHeaders: (more) => Object.assign(headers, more),
    log: lazyChild(log, requestId),
  };
  // A request refused at the door is counted, not logged: an access line each cuts the refusals a
  // shedding process can answer by 30 % (BENCH_ONLY=shed), when load is what it lacks. Shedding is
  // logged when it starts and when it ends, with the number refused.
  const logged = !input.shed;
  res.on('finish', () => {
    if (logged)
      logRequest(
        log,
        requestId,
        req.method ?? '',
        req.url ?? '',
        clientAddress(req, trust),
        res.statusCode,
        started,
        exchange.principal,
      );
    metrics?.observeRequest(route, req.method ?? '', res.statusCode, (performance.now() - started) / 1000);
  });
  const answer = (reply: Reply) => {
    const body = reply.json ?? JSON.stringify(reply.body);
    res.writeHead(reply.status, {
      ...headers,
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': String(Buffer.byteLength(body)),
    });
    res.end(body);
  };
  const fail = (err: unknown, extra: Record<string, string> = {}) => {
    const apiError: ApiError = toApiError(err);
    if (apiError.status >= 500)
      logServerError(log.child({ req_id: requestId }), dbOutage, err, apiError, requestId);
    Object.assign(headers, apiError.headers ?? {}, extra);
    answer({ status: apiError.status, body: errorBody(apiError, requestId) });
  };
  const run = () => {
    handler(exchange).then(answer, fail);
  };
  if (input.shed) {
    // The unread body is discarded as it arrives, not held until the answer can be written (behind
    // the answers of the connection's earlier requests, when a client pipelines).
    req.resume();
    fail(Overloaded.instance);
    return;
  }
  if (!input.body) {
    run();
    return;
  }
  // The body, as express.raw reads it: refused unread when its declared length is over the limit,
  // and as soon as it grows over the limit otherwise (the connection is closed: the rest is not read).
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > BODY_LIMIT_BYTES) {
    fail(new PayloadTooLarge(BODY_LIMIT_BYTES), { Connection: 'close' });
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let refused = false;
  req.on('data', (chunk: Buffer) => {
    if (refused) return;
    size += chunk.length;
    if (size > BODY_LIMIT_BYTES) {
      refused = true;
      fail(new PayloadTooLarge(BODY_LIMIT_BYTES), { Connection: 'close' });
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (refused) return;
    exchange.rawBody = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
    run();
  });
  // An aborted request has no one left to answer (Express's path answers nobody either).
  req.on('error', () => {
    refused = true;
  });
}

/** The request's logger, made on its first line (most requests log only the access line). */
function lazyChild(log: Logger, requestId: string): IngestExchange['log'] {
  let child: Logger | undefined;
  const get = () => (child ??= log.child({ req_id: requestId }));
  return {
    info: (obj, msg) => get().info(obj, msg),
    warn: (obj, msg) => get().warn(obj, msg),
  };
}
