import { describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/process.ts';

/**
 * The fast tier (`npm run test:fast`, every `*.unit.test.ts`) is what a developer runs on every
 * change: pure functions and files, no server, database, broker or child process, so it stays a few
 * seconds long. This keeps it so: a unit test importing any of those belongs in the full tier.
 */
const FORBIDDEN = [
  /helpers\/(cloud|databases|mqtt|smtp)\.ts/,
  /helpers\/gateway\//,
  /storage\/database\.ts/,
  /from 'node:(child_process|net|tls|http|https)'/,
  /from '(pg|better-sqlite3|aedes|mqtt)'/,
];

function unitTests(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : unitTests(full);
    return e.name.endsWith('.unit.test.ts') ? [full] : [];
  });
}

describe('the fast tier', () => {
  const files = unitTests(path.join(ROOT, 'test'));

  it('has tests', () => {
    expect(files.length).toBeGreaterThan(3);
  });

  it.each(files.map((f) => [path.relative(ROOT, f)]))('%s starts no server, database or process', (rel) => {
    const text = fs.readFileSync(path.join(ROOT, rel), 'utf8');
    expect(FORBIDDEN.filter((re) => re.test(text)).map(String)).toEqual([]);
  });
});
