import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Browser, Page } from 'playwright-core';
import { SystemClock, type Clock } from '../../cloud/src/clock.ts';
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

/**
 * The scripts the page has loaded so far and what each weighed on the wire (its encoded body:
 * gzip when the cloud sent it so), from the browser's own resource timing.
 */
async function scriptsLoaded(page: Page): Promise<{ name: string; bytes: number; decoded: number }[]> {
  // A string: the tests' TypeScript has no DOM types; the page runs it as it is.
  return page.evaluate(`performance
    .getEntriesByType('resource')
    .filter((e) => new URL(e.name).pathname.endsWith('.js'))
    .map((e) => ({ name: e.name, bytes: e.encodedBodySize, decoded: e.decodedBodySize }))`);
}

describe.each(DATABASES)('dashboard sign-in (%s)', (db) => {
  let t: TestCloud;
  let browser: Browser;
  /** The cloud's clock runs `offsetMicros` ahead of real time (only ever moved forward). */
  let offsetMicros = 0;
  beforeAll(async () => {
    const system = new SystemClock();
    const clock: Clock = { nowMicros: () => system.nowMicros() + offsetMicros };
    t = await startTestCloud({ db, clock });
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

  it("brings the mail's link to the page the sign-in started from, once", async () => {
    const context = await newContext(browser, t.url);
    const page = await context.newPage();
    await page.goto('/app/alarms?state=open');
    await page.waitForURL((u) => u.pathname === '/app/sign-in' && u.searchParams.has('next'));
    const link = new URL(linkFromMail(await requestCode(t, page, 'deep-link@example.com')));
    // The link, opened in another tab of the same browser, as from a mail program; at the address
    // the test's browser uses (the page is remembered per origin, and BASE_URL names localhost).
    const tab = await context.newPage();
    await tab.goto(link.pathname + link.search);
    await tab.waitForURL((u) => u.pathname === '/app/alarms' && u.searchParams.get('state') === 'open');
    await tab.getByRole('heading', { name: 'Alarms' }).waitFor();
    // Taken once: the overview opened afterwards stays the overview.
    await tab.goto('/app/');
    await tab.getByRole('heading', { name: 'Overview' }).waitFor();
    expect(new URL(tab.url()).pathname).toBe('/app/');
    await context.close();
  });

  it('signs in by the link in the mail; the same link again lands on the sign-in page with a message', async () => {
    const email = 'link@example.com';
    const first = await newContext(browser, t.url);
    const page = await first.newPage();
    await page.goto('/app/sign-in');
    const link = linkFromMail(await requestCode(t, page, email));
    expect(new URL(link).pathname).toBe('/app/auth/callback');
    // In the browser that asked for it (at the address that browser uses; the mail names BASE_URL's
    // localhost), the link signs in at once.
    await page.goto(new URL(link).pathname + new URL(link).search);
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

  it('asks another browser to confirm the address before the link signs it in, and refuses a form from another site', async () => {
    const email = 'elsewhere@example.com';
    const asking = await newContext(browser, t.url);
    const page = await asking.newPage();
    await page.goto('/app/sign-in');
    const link = new URL(linkFromMail(await requestCode(t, page, email)));
    await asking.close();

    // Another browser (a phone, or a victim sent someone else's link): the address, and a button.
    for (const viewport of ['desktop', 'phone'] as const) {
      const other = await newContext(browser, t.url, viewport);
      const tab = await other.newPage();
      await tab.goto(link.pathname + link.search);
      await tab.getByRole('heading', { name: `Sign in as ${email}?` }).waitFor();
      expect(await tab.evaluate('document.cookie')).toBe(''); // not signed in yet
      expect(await axeViolations(tab)).toEqual([]);
      await screenshot(tab, 'sign-in-link-confirm');
      if (viewport === 'phone') {
        await tab.getByRole('button', { name: `Sign in as ${email}` }).click();
        await tab.waitForURL((u) => u.pathname === '/app/');
        await tab.getByRole('heading', { name: 'Overview' }).waitFor();
      }
      await other.close();
    }

    // A page of another site that posts the form for a link of its own is refused.
    const foreign = await t.http.call('POST', '/app/auth/callback', undefined, {
      raw: `t=${encodeURIComponent('anything')}`,
      headers: {
        'Content-Type': 'application/x-www-form-urlencoded',
        Origin: 'https://evil.example',
        'Sec-Fetch-Site': 'cross-site',
      },
    });
    expect([foreign.status, foreign.json.error.code]).toEqual([403, 'forbidden']);
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

  it('says the same clear thing for a used code and an expired one; a new code then works', async () => {
    const email = 'used@example.com';
    const first = await newContext(browser, t.url);
    const page = await first.newPage();
    await page.goto('/app/sign-in');
    const used = codeFromMail(await requestCode(t, page, email));
    await page.getByLabel('Code').fill(used);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await first.close();

    // Another browser types the code that signed the first one in.
    const second = await newContext(browser, t.url);
    const again = await second.newPage();
    await again.goto(`/app/sign-in?step=code&email=${encodeURIComponent(email)}`);
    await again.getByLabel('Code').fill(used);
    await again.getByRole('button', { name: 'Sign in', exact: true }).click();
    await again.getByText('That code is wrong, expired or used already').waitFor();

    // A fresh code, typed eleven minutes later: expired (codes live ten minutes).
    await again.getByRole('button', { name: 'Use another address or send a new code' }).click();
    const late = codeFromMail(await requestCode(t, again, email));
    offsetMicros += 11 * 60 * 1_000_000;
    await again.getByLabel('Code').fill(late);
    await again.getByRole('button', { name: 'Sign in', exact: true }).click();
    await again.getByText('That code is wrong, expired or used already').waitFor();
    expect(await axeViolations(again)).toEqual([]);

    await again.getByRole('button', { name: 'Use another address or send a new code' }).click();
    const fresh = codeFromMail(await requestCode(t, again, email));
    await again.getByLabel('Code').fill(fresh);
    await again.getByRole('button', { name: 'Sign in', exact: true }).click();
    await again.getByRole('heading', { name: 'Overview' }).waitFor();
    await second.close();
  });

  it('signs in and moves through the pages with the keyboard alone', async () => {
    const email = 'keys@example.com';
    const context = await newContext(browser, t.url);
    const page = await context.newPage();
    const focused = () =>
      page.evaluate<string>('document.activeElement?.id || document.activeElement?.textContent || ""');
    await page.goto('/app/');
    await page.waitForURL((u) => u.pathname === '/app/sign-in');
    await page.getByLabel('E-mail address').waitFor();
    await page.keyboard.press('Tab');
    expect(await focused()).toBe('email');
    const mail = t.nextMail(email);
    await page.keyboard.type(email);
    await page.keyboard.press('Enter');
    await page.getByText('Check your mail').waitFor();
    // The code field has the focus as soon as it is shown.
    await page.waitForFunction('document.activeElement?.id === "code"');
    await page.keyboard.type(codeFromMail(await mail).toLowerCase());
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Overview' }).waitFor();

    // The first Tab reaches the skip link; it moves the focus to the page's content.
    await page.keyboard.press('Tab');
    expect(await focused()).toBe('Skip to content');
    await page.keyboard.press('Enter');
    await page.waitForFunction('document.activeElement?.id === "main"');
    // Back to the navigation, and on to Settings by Tab and Enter.
    await page.keyboard.press('Shift+Tab');
    for (let i = 0; i < 20 && (await focused()) !== 'Settings'; i++) await page.keyboard.press('Shift+Tab');
    expect(await focused()).toBe('Settings');
    await page.keyboard.press('Enter');
    await page.waitForURL((u) => u.pathname === '/app/settings');
    await page.getByRole('heading', { name: 'API tokens' }).waitFor();
    // The focus is always drawn: the focused element has a visible outline.
    await page.keyboard.press('Tab');
    const outline = await page.evaluate<string>('getComputedStyle(document.activeElement).outlineStyle');
    expect(outline).not.toBe('none');
    await context.close();
  });

  it('loads under 250 KB of compressed JavaScript before the sign-in page and before the overview', async () => {
    const context = await newContext(browser, t.url);
    const signedOut = await context.newPage();
    await signedOut.goto('/app/');
    // The page shows once its scripts ran, so they have all arrived (the live stream never idles).
    await signedOut.getByLabel('E-mail address').waitFor();
    const beforeSignIn = await scriptsLoaded(signedOut);
    await signInInBrowser(t, signedOut, 'weight@example.com');
    await signedOut.close();

    // A signed-in browser opening the dashboard afresh (nothing cached: a new context's first visit).
    const fresh = await newContext(browser, t.url);
    await fresh.addCookies(await context.cookies());
    const page = await fresh.newPage();
    await page.goto('/app/');
    await page.getByText('No sites yet').waitFor();
    const beforeOverview = await scriptsLoaded(page);
    for (const scripts of [beforeSignIn, beforeOverview]) {
      expect(scripts.length).toBeGreaterThan(0);
      for (const s of scripts) expect([s.name, s.bytes > 0]).toEqual([s.name, true]);
      const compressed = scripts.reduce((a, s) => a + s.bytes, 0);
      expect(compressed).toBeLessThan(250 * 1024);
      // Compressed on the wire indeed: fewer bytes came than the scripts hold.
      expect(compressed).toBeLessThan(scripts.reduce((a, s) => a + s.decoded, 0));
    }
    await context.close();
    await fresh.close();
  });

  it('shows a page that does not exist, and a site that does not exist, with a way back', async () => {
    for (const viewport of ['desktop', 'phone'] as const) {
      const context = await newContext(browser, t.url, viewport);
      const page = await context.newPage();
      await signInInBrowser(t, page, `lost-${viewport}@example.com`, { from: '/app/no/such/page' });
      await page.getByRole('heading', { name: 'Page not found' }).waitFor();
      expect(await axeViolations(page)).toEqual([]);
      if (viewport === 'phone') {
        // The five pages fit one line of the phone's header, each link a 44 px touch target.
        const links = await page.evaluate<{ top: number; height: number }[]>(
          `Array.from(document.querySelectorAll('header nav a'), (a) => {
            const r = a.getBoundingClientRect();
            return { top: r.top, height: r.height };
          })`,
        );
        expect(links).toHaveLength(5);
        expect(new Set(links.map((l) => Math.round(l.top))).size).toBe(1);
        for (const l of links) expect(l.height).toBeGreaterThanOrEqual(44);
      }
      await screenshot(page, 'not-found');
      await page.getByRole('link', { name: 'Go to the overview' }).click();
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
      await page.goto('/app/sites/site_nope');
      await page.getByRole('heading', { name: 'Site not found' }).waitFor();
      await page.getByText('There is no such site in this account').waitFor();
      expect(await page.getByText('site_not_found').count()).toBe(0); // words, not an error code
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, 'site-not-found');
      await page.goto('/app/events/evt_nope');
      await page.getByRole('heading', { name: 'Alarm not found' }).waitFor();
      await page.getByRole('link', { name: 'Back to the alarms' }).click();
      await page.getByRole('heading', { name: 'Alarms' }).waitFor();
      await context.close();
    }
  });

  it('signs out from the header: the session ends on the server, and the browser shows the sign-in page', async () => {
    const context = await newContext(browser, t.url);
    const page = await context.newPage();
    await signInInBrowser(t, page, 'leaving@example.com');
    const cookie = (await context.cookies()).find((c) => c.name === 'os_session')!.value;
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await page.waitForURL((u) => u.pathname === '/app/sign-in');
    await page.getByLabel('E-mail address').waitFor();
    expect((await context.cookies()).find((c) => c.name === 'os_session')).toBeUndefined();
    const me = await t.http.get('/app/api/accounts/me', { cookie: `os_session=${cookie}` });
    expect([me.status, me.json.error.code]).toEqual([401, 'auth_required']);
    // Back in history, the dashboard asks for a sign-in again.
    await page.goto('/app/');
    await page.waitForURL((u) => u.pathname === '/app/sign-in');
    await context.close();
  });
});
