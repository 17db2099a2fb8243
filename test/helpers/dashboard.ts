import type { Page } from 'playwright-core';
import { codeFromMail, type TestCloud } from './cloud.ts';

/**
 * Signs in through the dashboard like a person: opens `from` (default `/app/`), which sends a
 * signed-out browser to the sign-in page, asks for a code, reads it from the mail the cloud sends
 * (the outbox), types it, and waits until the app is back on `from`. A new address signs up.
 */
export async function signInInBrowser(
  t: TestCloud,
  page: Page,
  email: string,
  options: { from?: string } = {},
): Promise<void> {
  const from = options.from ?? '/app/';
  await page.goto(from);
  await page.waitForURL((u) => u.pathname === '/app/sign-in');
  const mail = t.nextMail(email);
  await page.getByLabel('E-mail address').fill(email);
  await page.getByRole('button', { name: 'Send me a code' }).click();
  const code = codeFromMail(await mail);
  await page.getByLabel('Code').fill(code);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  const target = new URL(from, t.url);
  await page.waitForURL((u) => u.pathname === target.pathname && u.search === target.search);
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}
