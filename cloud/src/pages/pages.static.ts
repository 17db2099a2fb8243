import fs from 'node:fs';
import path from 'node:path';
import express, { type Express, type Request, type Response } from 'express';
import { ApiError } from '../errors.ts';

/** Where `npm run build:web` (scripts/build-web.ts) writes the browser pages. */
export const WEB_DIST = path.resolve(import.meta.dirname, '../../../web/dist');

/**
 * The security headers of a page: scripts and styles from this origin only, no framing, no Referer
 * to other origins (the dashboard's URLs can carry magic-link tokens; `same-origin`, since under
 * `no-referrer` a browser's own POSTs say `Origin: null`, which the cross-site check refuses). `connect-src 'self'` covers the JSON
 * API and the live stream.
 */
export const PAGE_HEADERS = {
  'Content-Security-Policy':
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
  'Referrer-Policy': 'same-origin',
  'X-Frame-Options': 'DENY',
  'Cache-Control': 'no-cache',
};

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
};

/**
 * Serves one built single-page app under `/<page>`: its content-hashed assets under
 * `/<page>/assets/` (immutable, gzip when the client takes it), and its `index.html` for every other
 * path under `/<page>`, so a deep link opens the app, which routes it in the browser. Paths under
 * `/<page>/api/` are never the page: they fall through to the JSON 404.
 */
export function servePage(app: Express, page: string, dist = WEB_DIST): void {
  const dir = path.join(dist, page);
  const assets = path.join(dir, 'assets');

  app.use(`/${page}/assets`, (req, _res, next) => {
    // The precompressed copy when the client accepts gzip (every browser does).
    const file = path.join(assets, path.normalize(req.path));
    if (
      file.startsWith(assets + path.sep) &&
      req.acceptsEncodings('gzip') === 'gzip' &&
      fs.existsSync(`${file}.gz`)
    ) {
      req.url = `${req.path}.gz`;
    }
    next();
  });
  app.use(
    `/${page}/assets`,
    express.static(assets, {
      index: false,
      redirect: false,
      immutable: true,
      maxAge: '365d',
      setHeaders: (res, file) => {
        res.setHeader('X-Content-Type-Options', 'nosniff');
        if (file.endsWith('.gz')) {
          res.setHeader('Content-Encoding', 'gzip');
          res.setHeader('Vary', 'Accept-Encoding');
          const type = TYPES[path.extname(file.slice(0, -3))];
          if (type) res.setHeader('Content-Type', type);
        }
      },
    }),
  );

  const index = path.join(dir, 'index.html');
  const html = (req: Request, res: Response) => {
    if (!fs.existsSync(index)) {
      throw new ApiError(
        503,
        'page_not_built',
        `the ${page} page is not built: run "npm run build:web" (npm install does it)`,
      );
    }
    res.set(PAGE_HEADERS).type('html').sendFile(index);
  };
  app.get(new RegExp(`^/${page}(?:/(?!api/|api$|assets/).*)?$`), html);
}

/** `GET /`: a browser goes to the dashboard; a script learns where the API is. */
export function serveRoot(app: Express): void {
  app.get('/', (req, res) => {
    if (req.accepts(['json', 'html']) === 'html') {
      res.redirect(302, '/app/');
      return;
    }
    res.json({ dashboard: '/app/', api: '/v1/', openapi: '/v1/openapi.json' });
  });
}
