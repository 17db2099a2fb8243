/**
 * `npm run build:gateway`: the gateway as one JavaScript file run by plain `node`, without tsx.
 *
 * esbuild bundles gateway/src/main.ts and everything it imports into `dist/gateway/gateway.mjs`,
 * except the two native modules (better-sqlite3 for the buffer, @serialport/bindings-cpp for the
 * serial ports): a `.node` file is built for one platform and cannot go into a bundle. They stay
 * external and load from `dist/gateway/node_modules/`, which the build fills with this machine's
 * copies (with their few runtime dependencies), and `dist/gateway/package.json` names their exact
 * versions, so `npm install --omit=dev` in that folder on a Raspberry Pi fetches the linux-arm64
 * builds instead (docs/gateway.md, "The production build").
 *
 *   node dist/gateway/gateway.mjs --config /etc/sensor-gateway/gateway.yaml
 */
import fs from 'node:fs';
import path from 'node:path';
import * as esbuild from 'esbuild';

const root = path.resolve(import.meta.dirname, '..');
export const GATEWAY_DIST = path.join(root, 'dist', 'gateway');
export const GATEWAY_BUNDLE = path.join(GATEWAY_DIST, 'gateway.mjs');

/** Packages with a compiled addon: external to the bundle, installed beside it per platform. */
const NATIVE = ['better-sqlite3', '@serialport/bindings-cpp'] as const;
/** Dependencies used only while installing (building or downloading the addon), not at run time. */
const INSTALL_ONLY = new Set(['prebuild-install', 'node-addon-api', 'node-gyp']);
/** Within the native packages: what the addon loads at run time (the rest is sources and tests). */
const KEEP: Record<string, string[]> = {
  'better-sqlite3': ['package.json', 'lib', 'LICENSE', 'build/Release/better_sqlite3.node'],
  '@serialport/bindings-cpp': ['package.json', 'dist', 'prebuilds', 'LICENSE', 'build/Release'],
};

interface PackageJson {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
}

/** The folder of `name` as Node would find it from `fromDir` (walking up the node_modules). */
function packageDir(name: string, fromDir: string): string {
  for (let dir = fromDir; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (fs.existsSync(path.join(candidate, 'package.json'))) return fs.realpathSync(candidate);
    if (path.dirname(dir) === dir) throw new Error(`${name} is not installed (from ${fromDir})`);
  }
}

function readPackage(dir: string): PackageJson {
  return JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as PackageJson;
}

/** Copies the native packages and their run-time dependency closure into `<outdir>/node_modules`. */
function copyNativeModules(outdir: string): Record<string, string> {
  const versions: Record<string, string> = {};
  const seen = new Set<string>();
  const visit = (name: string, fromDir: string) => {
    if (seen.has(name) || INSTALL_ONLY.has(name)) return;
    seen.add(name);
    const dir = packageDir(name, fromDir);
    const pkg = readPackage(dir);
    const target = path.join(outdir, 'node_modules', name);
    fs.mkdirSync(target, { recursive: true });
    for (const entry of KEEP[name] ?? fs.readdirSync(dir)) {
      const from = path.join(dir, entry);
      if (!fs.existsSync(from) || entry === 'node_modules') continue;
      fs.cpSync(from, path.join(target, entry), { recursive: true, dereference: true });
    }
    for (const dep of Object.keys(pkg.dependencies ?? {})) visit(dep, dir);
  };
  for (const name of NATIVE) {
    versions[name] = readPackage(packageDir(name, root)).version;
    visit(name, root);
  }
  return versions;
}

export interface GatewayBuild {
  bundle: string;
  bytes: number;
  natives: Record<string, string>;
}

export async function buildGateway(
  options: { outdir?: string; quiet?: boolean } = {},
): Promise<GatewayBuild> {
  const outdir = options.outdir ?? GATEWAY_DIST;
  const staging = `${outdir}.tmp-${process.pid}`;
  fs.rmSync(staging, { recursive: true, force: true });
  const project = readPackage(root);
  await esbuild.build({
    entryPoints: [path.join(root, 'gateway', 'src', 'main.ts')],
    outfile: path.join(staging, 'gateway.mjs'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: [...NATIVE],
    define: { GATEWAY_BUILD_VERSION: JSON.stringify(project.version) },
    // CommonJS dependencies call require(): give the ES module one that resolves beside the bundle.
    banner: {
      js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
    },
    minifySyntax: true,
    minifyWhitespace: true,
    legalComments: 'none',
    logLevel: 'warning',
  });
  const natives = copyNativeModules(staging);
  fs.writeFileSync(
    path.join(staging, 'package.json'),
    `${JSON.stringify(
      {
        name: 'sensor-gateway',
        version: project.version,
        private: true,
        type: 'module',
        description: 'The sensor gateway, bundled: node gateway.mjs --config FILE',
        engines: { node: '>=20' },
        dependencies: natives,
      },
      null,
      2,
    )}\n`,
  );
  fs.rmSync(outdir, { recursive: true, force: true });
  fs.renameSync(staging, outdir);
  const bundle = path.join(outdir, 'gateway.mjs');
  const bytes = fs.statSync(bundle).size;
  if (!options.quiet) {
    process.stdout.write(
      `${path.relative(root, bundle)}: ${(bytes / 1024).toFixed(0)} KiB; native beside it: ${Object.entries(
        natives,
      )
        .map(([n, v]) => `${n}@${v}`)
        .join(', ')}\n`,
    );
  }
  return { bundle, bytes, natives };
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  buildGateway().catch((err: unknown) => {
    process.stderr.write(
      `build failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  });
}
