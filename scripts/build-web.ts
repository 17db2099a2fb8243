/**
 * Builds the browser code: the dashboard (`web/app/`) served at `/app` and the public map
 * (`web/map/`) served at `/map`. esbuild bundles each entry into `web/dist/<page>/` with content-hashed
 * file names (served as immutable), writes the page's `index.html` naming them, and a gzip copy of each
 * asset so the cloud serves it compressed without compressing on every request.
 *
 * Runs from `npm install` (the `prepare` script), `npm run build:web`, and before the tests (jest's
 * global setup), so the cloud always serves what the sources say.
 */
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import * as esbuild from 'esbuild';

const root = path.resolve(import.meta.dirname, '..');
const webDir = path.join(root, 'web');
export const WEB_DIST = path.join(webDir, 'dist');

/** The pages: each is an entry script, a stylesheet it imports, and an HTML template. */
const PAGES = ['app', 'map'] as const;

export interface BuiltPage {
  page: string;
  /** Asset file names (relative to the page's dist folder) with their raw and gzip sizes. */
  assets: { file: string; bytes: number; gzipBytes: number }[];
}

export async function buildWeb(options: { quiet?: boolean } = {}): Promise<BuiltPage[]> {
  const built: BuiltPage[] = [];
  for (const page of PAGES) {
    const entry = path.join(webDir, page, 'main.tsx');
    if (!fs.existsSync(entry)) continue;
    const outdir = path.join(WEB_DIST, page);
    const staging = `${outdir}.tmp-${process.pid}`;
    fs.rmSync(staging, { recursive: true, force: true });
    const result = await esbuild.build({
      entryPoints: [entry],
      outdir: path.join(staging, 'assets'),
      entryNames: '[name]-[hash]',
      chunkNames: '[name]-[hash]',
      assetNames: '[name]-[hash]',
      bundle: true,
      splitting: true,
      format: 'esm',
      minify: true,
      sourcemap: false,
      target: ['chrome110', 'firefox110', 'safari16'],
      jsx: 'automatic',
      jsxImportSource: 'preact',
      loader: { '.woff2': 'file', '.svg': 'file', '.json': 'json' },
      metafile: true,
      legalComments: 'none',
      logLevel: 'silent',
    });
    const outputs = Object.entries(result.metafile.outputs);
    const main = outputs.find(
      ([, o]) => o.entryPoint !== undefined && path.resolve(root, o.entryPoint) === entry,
    );
    if (!main) throw new Error(`esbuild produced no output for ${entry}`);
    const script = path.basename(main[0]);
    const style = main[1].cssBundle ? path.basename(main[1].cssBundle) : null;
    const template = fs.readFileSync(path.join(webDir, page, 'index.html'), 'utf8');
    const html = template
      .replace('<!--styles-->', style ? `<link rel="stylesheet" href="/${page}/assets/${style}">` : '')
      .replace('<!--scripts-->', `<script type="module" src="/${page}/assets/${script}"></script>`);
    fs.writeFileSync(path.join(staging, 'index.html'), html);
    const assets: BuiltPage['assets'] = [];
    for (const file of fs.readdirSync(path.join(staging, 'assets'))) {
      const full = path.join(staging, 'assets', file);
      const raw = fs.readFileSync(full);
      const gz = zlib.gzipSync(raw, { level: 9 });
      fs.writeFileSync(`${full}.gz`, gz);
      assets.push({ file: `assets/${file}`, bytes: raw.length, gzipBytes: gz.length });
    }
    // The finished folder replaces the old one in two renames, so a running cloud never serves a
    // half-written page.
    const old = `${outdir}.old-${process.pid}`;
    if (fs.existsSync(outdir)) fs.renameSync(outdir, old);
    fs.renameSync(staging, outdir);
    fs.rmSync(old, { recursive: true, force: true });
    built.push({ page, assets });
    if (!options.quiet) {
      const js = assets.filter((a) => a.file.endsWith('.js'));
      const total = js.reduce((n, a) => n + a.gzipBytes, 0);
      console.log(`web/${page}: ${js.length} scripts, ${(total / 1024).toFixed(1)} KB gzip in all`);
    }
  }
  return built;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await buildWeb({ quiet: process.argv.includes('--quiet') });
}
