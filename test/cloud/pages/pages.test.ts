import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { WEB_DIST } from '../../../cloud/src/pages/pages.static.ts';
import { startTestCloud, type TestCloud } from '../../helpers/cloud.ts';

/** The scripts a page loads before it can show anything: its entry and what that imports statically. */
function firstLoadScripts(page: string): string[] {
  const html = fs.readFileSync(path.join(WEB_DIST, page, 'index.html'), 'utf8');
  const entry = /<script type="module" src="\/[a-z]+\/assets\/([^"]+)"/.exec(html)![1]!;
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const source = fs.readFileSync(path.join(WEB_DIST, page, 'assets', file), 'utf8');
    // Static imports only (`import ... from "./x.js"` and `import "./x.js"`); `import("./x.js")` loads later.
    for (const m of source.matchAll(/(?:from|import)\s*"\.\/([^"]+\.js)"/g)) visit(m[1]!);
  };
  visit(entry);
  return [...seen];
}

describe('the dashboard pages', () => {
  let t: TestCloud;
  beforeAll(async () => {
    t = await startTestCloud();
  });
  afterAll(async () => {
    await t.stop();
  });

  it('sends a browser that opens the cloud at / to the dashboard, and tells a script where the API is', async () => {
    const browser = await fetch(`${t.url}/`, { headers: { Accept: 'text/html,*/*' }, redirect: 'manual' });
    expect(browser.status).toBe(302);
    expect(browser.headers.get('location')).toBe('/app/');
    const script = await fetch(`${t.url}/`);
    expect(script.status).toBe(200);
    expect(await script.json()).toEqual({ dashboard: '/app/', api: '/v1/', openapi: '/v1/openapi.json' });
  });

  it('answers every page URL with the app, so a link from a mail opens it', async () => {
    for (const p of [
      '/app',
      '/app/',
      '/app/sensors/sen_x',
      '/app/events/evt_1?x=1',
      '/app/settings/tokens',
    ]) {
      const res = await fetch(`${t.url}${p}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
      expect(res.headers.get('referrer-policy')).toBe('same-origin');
      expect(res.headers.get('cache-control')).toBe('no-cache');
      expect(await res.text()).toContain('<div id="root">');
    }
  });

  it('never answers an API path or a missing asset with the page', async () => {
    const api = await fetch(`${t.url}/app/api/nothing-here`);
    expect(api.status).toBe(404);
    expect(((await api.json()) as { error: { code: string } }).error.code).toBe('not_found');
    const asset = await fetch(`${t.url}/app/assets/missing.js`);
    expect(asset.status).toBe(404);
  });

  it('serves the assets gzip-compressed and immutable, with their own content type', async () => {
    const [script] = firstLoadScripts('app');
    const res = await fetch(`${t.url}/app/assets/${script}`, { headers: { 'Accept-Encoding': 'gzip' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-encoding')).toBe('gzip');
    expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(res.headers.get('cache-control')).toContain('immutable');
    const body = await res.text(); // fetch undoes the gzip
    expect(body).toBe(fs.readFileSync(path.join(WEB_DIST, 'app', 'assets', script!), 'utf8'));
    const traversal = await fetch(`${t.url}/app/assets/..%2f..%2fpackage.json`);
    expect(traversal.status).toBe(404);
  });

  it('loads under 250 KB of compressed JavaScript on first load', () => {
    const scripts = firstLoadScripts('app');
    const gzipBytes = scripts
      .map(
        (f) => zlib.gzipSync(fs.readFileSync(path.join(WEB_DIST, 'app', 'assets', f)), { level: 9 }).length,
      )
      .reduce((a, b) => a + b, 0);
    expect(scripts.length).toBeGreaterThan(0);
    expect(gzipBytes).toBeLessThan(250 * 1024);
  });
});
