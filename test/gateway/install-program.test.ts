import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from '../helpers/process.ts';
import { tempDir } from './helpers/gateway.ts';
import { makePki, writeBundle } from './helpers/pki.ts';

const run = promisify(execFile);
let dir: string;

beforeAll(() => {
  dir = tempDir('gw-install-');
});

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/**
 * hardware/pi/install.sh's program step, as the Raspberry Pi OS installer runs it: the copy of the
 * checkout's gateway into a folder, npm's install of the run-time packages there (the project's
 * own build scripts are not in that folder) and the native addons built for this machine. The
 * folder then runs the gateway: its SQLite addon loads, and `run-gateway` validates a file.
 *
 * better-sqlite3's install fetches a prebuilt addon and compiles one when it cannot (this machine
 * has no internet), which takes minutes. The short form, in `npm test`, hands its installer a local
 * prebuild made of the checkout's own compiled addon (prebuild-install's documented
 * `npm_config_better_sqlite3_local_prebuilds`), so everything but the compiler runs; the full form,
 * `npm run test:install`, compiles it as a Pi without internet does.
 */
const FROM_SOURCE = process.env.GATEWAY_INSTALL_FROM_SOURCE === '1';

/** A folder with the checkout's better-sqlite3 addon as prebuild-install names and packs a prebuild. */
async function localPrebuilds(into: string): Promise<string> {
  const pkg = JSON.parse(
    fs.readFileSync(path.join(ROOT, 'node_modules/better-sqlite3/package.json'), 'utf8'),
  ) as { version: string };
  const name = `better-sqlite3-v${pkg.version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  fs.mkdirSync(into, { recursive: true });
  await run('tar', [
    '-czf',
    path.join(into, name),
    '-C',
    path.join(ROOT, 'node_modules/better-sqlite3'),
    'build/Release/better_sqlite3.node',
  ]);
  return into;
}

describe('the gateway installer (hardware/pi/install-program.sh)', () => {
  it('installs a folder that runs the gateway', async () => {
    const app = path.join(dir, 'app');
    const prebuilds = FROM_SOURCE
      ? {}
      : { npm_config_better_sqlite3_local_prebuilds: await localPrebuilds(path.join(dir, 'prebuilds')) };
    const installed = await run('bash', [path.join(ROOT, 'hardware/pi/install-program.sh'), ROOT, app], {
      env: {
        ...process.env,
        npm_config_prefer_offline: 'true',
        npm_config_loglevel: 'info',
        npm_config_foreground_scripts: 'true',
        ...prebuilds,
      },
      maxBuffer: 64 * 1024 * 1024,
    });
    const output = installed.stdout + installed.stderr;
    if (FROM_SOURCE) expect(output).toContain('gyp info ok');
    else expect(output).toContain('found local prebuild');
    expect(fs.existsSync(path.join(app, 'scripts'))).toBe(false);
    expect(fs.existsSync(path.join(app, 'node_modules', 'typescript'))).toBe(false); // run-time packages only

    const sqlite = await run(
      process.execPath,
      [
        '-e',
        "process.stdout.write(new (require('better-sqlite3'))(':memory:').prepare('select 1 + 1 as n').get().n + '')",
      ],
      { cwd: app },
    );
    expect(sqlite.stdout).toBe('2');

    const pki = makePki(path.join(dir, 'pki'));
    writeBundle(path.join(dir, 'bridge.json'), pki, 'mqtts://127.0.0.1:8883');
    const config = path.join(dir, 'gateway.yaml');
    fs.writeFileSync(config, 'gateway: { id: gw-installed }\nuplink: { bundle: ./bridge.json }\n');
    const linked = path.join(dir, 'run-gateway'); // run through a link, from another folder
    fs.symlinkSync(path.join(app, 'run-gateway'), linked);
    const validated = await run(linked, ['--config', config, '--validate'], { cwd: '/' });
    expect(validated.stdout).toContain('valid (gateway id gw-installed)');
  }, 600_000);
});
