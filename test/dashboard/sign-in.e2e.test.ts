import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Browser, Page } from 'playwright-core';
import { axeViolations, launchBrowser, newContext, screenshot } from '../helpers/browser.ts';
import { codeFromMail, linkFromMail, startTestCloud, type TestCloud } from '../helpers/cloud.ts';
import { DATABASES } from '../helpers/databases.ts';
import { signInInBrowser } from '../helpers/dashboard.ts';

/** Asks for a code on the sign-in page the browser shows now; resolves with the mail. */
async function requestCode(t: TestCloud, page: Page, email: string) {
  const mail = t.nextMail(email);
  await page.getByLabel('E-mail address').fill(email);
  await page.getByRole('button', { name: 'Send me a code' }).click();
  await page.getByText('Check your mail').waitFor();
  return mail;
}

jest.setTimeout(60_000);

describe.each(DATABASES)('dashboard sign-in (%s)', (db) => {
  let t: TestCloud;
  let browser: Browser;
  beforeAll(async () => {
    t = await startTestCloud({ db });
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it('signs in with the code from the mail, typed with the hyphen', async () => {
    const context = await newContext(browser, t.url);
    const page = await context.newPage();
    await signInInBrowser(t, page, 'hyphen@example.com');
    await expect(page.getByRole('heading', { name: 'Overview' }).isVisible()).resolves.toBe(true);
    const nav = page.getByRole('navigation', { name: 'Main' });
    expect(await nav.getByRole('link', { name: 'Overview' }).getAttribute('aria-current')).toBe('page');
    await context.close();
  });

  it('takes the code in lower case without the hyphen; a wrong code says so clearly', async () => {
    for (const viewport of ['desktop', 'phone'] as const) {
      const context = await newContext(browser, t.url, viewport);
      const page = await context.newPage();
      const email = `lower-${viewport}@example.com`;
      await page.goto('/app/');
      await page.waitForURL((u) => u.pathname === '/app/sign-in');
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, 'sign-in-email');
      const code = codeFromMail(await requestCode(t, page, email));
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, 'sign-in-code');

      const wrong = code.startsWith('A') ? 'BBB-BBB' : 'AAA-AAA';
      await page.getByLabel('Code').fill(wrong);
      await page.getByRole('button', { name: 'Sign in', exact: true }).click();
      await page.getByText('That code is wrong, expired or used already').waitFor();
      // The message is tied to the field, so a screen reader reads it with the input.
      const described = await page.getByLabel('Code').getAttribute('aria-describedby');
      expect(described ?? '').toContain('code-error');
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, 'sign-in-wrong-code');

      await page.getByLabel('Code').fill(code.replace('-', '').toLowerCase());
      await page.getByRole('button', { name: 'Sign in', exact: true }).click();
      await page.waitForURL((u) => u.pathname === '/app/');
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
      await context.close();
    }
  });

  it('signs in by the link in the mail; the same link again lands on the sign-in page with a message', async () => {
    const email = 'link@example.com';
    const first = await newContext(browser, t.url);
    const page = await first.newPage();
    await page.goto('/app/sign-in');
    const link = linkFromMail(await requestCode(t, page, email));
    expect(new URL(link).pathname).toBe('/app/auth/callback');
    await page.goto(link);
    await page.waitForURL((u) => u.pathname === '/app/');
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await first.close();

    const second = await newContext(browser, t.url);
    const again = await second.newPage();
    await again.goto(link);
    await again.waitForURL((u) => u.pathname === '/app/sign-in' && u.searchParams.get('link') === 'invalid');
    await again.getByText('That sign-in link is expired or was used already').waitFor();
    expect(await axeViolations(again)).toEqual([]);
    await screenshot(again, 'sign-in-link-used');
    await second.close();
  });

  it('brings a deep link opened signed out back to its page after sign-in', async () => {
    // A site made through the API, so its page exists to land on.
    const context = await newContext(browser, t.url);
    const page = await context.newPage();
    await signInInBrowser(t, page, 'deep@example.com');
    const created = await page.evaluate(async () => {
      const res = await fetch('/app/api/sites', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Requested-With': 'XMLHttpRequest' },
        body: JSON.stringify({ name: 'Cold room', vertical: 'food_service', timezone: 'Europe/Berlin' }),
      });
      return (await res.json()) as { id: string };
    });
    await context.close();

    const fresh = await newContext(browser, t.url);
    const deep = await fresh.newPage();
    const target = `/app/sites/${created.id}`;
    await signInInBrowser(t, deep, 'deep@example.com', { from: target });
    await deep.getByRole('heading', { name: 'Cold room' }).waitFor();
    expect(new URL(deep.url()).pathname).toBe(target);
    await fresh.close();
  });
});
