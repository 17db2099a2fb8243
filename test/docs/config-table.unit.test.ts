import { describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import path from 'node:path';
import { ENV_VARIABLES } from '../../cloud/src/config.ts';
import { ROOT } from '../helpers/process.ts';

/** The README's "Configure" table names every variable the cloud reads, and only those. */
describe('README configuration table', () => {
  it('lists exactly the variables of cloud/src/config.ts', () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const section = readme.split(/^## Configure$/m)[1]?.split(/^## /m)[0] ?? '';
    const listed = [...section.matchAll(/^\| `([A-Z0-9_]+)`/gm)].map((m) => m[1]);
    expect(listed.length).toBeGreaterThan(0);
    expect([...listed].sort()).toEqual([...ENV_VARIABLES].sort());
  });
});
