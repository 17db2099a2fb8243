import { execFileSync } from 'node:child_process';
import path from 'node:path';
import process from 'node:process';

/** The cloud serves the built pages: build them from the sources before any test runs. */
export default function globalSetup() {
  const root = path.resolve(import.meta.dirname, '..');
  execFileSync(process.execPath, ['--import', 'tsx', 'scripts/build-web.ts', '--quiet'], {
    cwd: root,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}
