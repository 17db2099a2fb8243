import { afterEach, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { LISTEN_BACKLOG } from '../../../cloud/src/cloud.ts';
import { startTestCloud, type TestCloud } from '../../helpers/cloud.ts';

const run = promisify(execFile);

/**
 * The HTTP listener's backlog, as the kernel reports it (`ss`: a listening socket's Send-Q is its
 * backlog): LISTEN_BACKLOG, capped by `net.core.somaxconn`, not Node's default of 511, which
 * overflowed when a site's devices all reconnected at once.
 */
describe('the HTTP listen backlog', () => {
  let t: TestCloud | null = null;
  afterEach(async () => {
    await t?.stop();
    t = null;
  });

  it('is LISTEN_BACKLOG, or the system cap below it', async () => {
    t = await startTestCloud();
    const port = new URL(t.url).port;
    const { stdout } = await run('ss', ['-Hltn', `sport = :${port}`]);
    const [state, , backlog] = stdout.trim().split(/\s+/);
    expect(state).toBe('LISTEN');
    const cap = Number(fs.readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
    expect(LISTEN_BACKLOG).toBeGreaterThan(511);
    expect(Number(backlog)).toBe(Math.min(LISTEN_BACKLOG, cap));
  });
});
