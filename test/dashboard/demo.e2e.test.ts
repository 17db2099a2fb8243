import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { axeViolations, launchBrowser, newContext, screenshot } from '../helpers/browser.ts';
import { ROOT } from '../helpers/process.ts';

jest.setTimeout(240_000);

/**
 * `npm run demo` as a newcomer runs it: the one-time link it prints opens the dashboard signed in,
 * on the demo's account, with the emulated devices' readings. The demo makes its own cloud on
 * SQLite in a temporary folder, so this test runs once, whatever TEST_DATABASE_URL says.
 */
describe('npm run demo', () => {
  let demo: ChildProcess;
  let exited: Promise<unknown>;
  let output = '';
  let browser: Browser;
  let link: string;

  beforeAll(async () => {
    demo = spawn(
      process.execPath,
      ['--import', 'tsx', 'scripts/demo.ts', '--interval', '1', '--seconds', '600'],
      {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    exited = new Promise((resolve) => demo.once('exit', resolve));
    demo.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    link = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no dashboard link within 120 s:\n${output}`)),
        120_000,
      );
      demo.stdout!.on('data', (c: Buffer) => {
        output += c.toString();
        const m = /dashboard, signed in as demo@example\.com \(a one-time link[^)]*\):\n\s+(\S+)/.exec(
          output,
        );
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
      void exited.then(() => reject(new Error(`the demo ended before printing the link:\n${output}`)));
    });
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    if (demo && demo.exitCode === null) {
      // The demo stops its devices, gateway and cloud on SIGTERM, and removes its folder.
      demo.kill('SIGTERM');
      const killer = setTimeout(() => demo.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(killer);
    }
  });

  it('prints a one-time link that opens the dashboard signed in, with the demo’s devices reporting', async () => {
    const url = new URL(link);
    expect(url.pathname).toBe('/app/auth/callback');
    const context = await newContext(browser, url.origin);
    const page = await context.newPage();
    await page.goto(link);
    // The demo asked for the link from a script, not this browser: the address is confirmed first.
    await page.getByRole('button', { name: 'Sign in as demo@example.com' }).click();
    await page.waitForURL((u) => u.pathname === '/app/');
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByText('demo@example.com').waitFor();
    const site = page.locator('section.site-card', { hasText: 'Demo kitchen' });
    await site.waitFor();
    // The emulated devices' sensors arrive with their first readings (live, or at a reload).
    await site.locator('tr[data-sensor] td.value', { hasText: /\d/ }).nth(3).waitFor({ timeout: 120_000 });
    await page.locator('.live-status.live-live').waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'demo-overview');
    // A newcomer's terminal shows the readings, not the cloud's or the gateway's warnings.
    expect(output.split('\n').filter((line) => /^\{"level":(40|50|60)\b/.test(line))).toEqual([]);

    const phone = await newContext(browser, url.origin, 'phone');
    await phone.addCookies(await context.cookies());
    const small = await phone.newPage();
    await small.goto('/app/');
    await small
      .locator('section.site-card', { hasText: 'Demo kitchen' })
      .locator('tr[data-sensor]')
      .first()
      .waitFor();
    await screenshot(small, 'demo-overview');
    await phone.close();
    await context.close();

    // One time only: the same link in another browser lands on the sign-in page with a message.
    const other = await newContext(browser, url.origin);
    const again = await other.newPage();
    await again.goto(link);
    await again.waitForURL((u) => u.pathname === '/app/sign-in');
    await again.getByText('That sign-in link is expired or was used already').waitFor();
    await other.close();
  });
});
