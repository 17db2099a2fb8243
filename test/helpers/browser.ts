import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { TestCloud } from './cloud.ts';
import { ROOT } from './process.ts';

/**
 * Debian's Chromium, driven by playwright-core (never a downloaded browser). The flags keep it
 * headless and off the network beyond the page under test.
 */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
];

/** Where tests write screenshots to be looked at (git-ignored). */
export const SCREENSHOT_DIR = path.join(ROOT, 'test-output', 'screenshots');

export const VIEWPORTS = {
  desktop: { width: 1280, height: 900 },
  phone: { width: 390, height: 844 },
} as const;

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
}

/** A fresh context (own cookies) at a viewport, with the cloud's URL as its base. */
export async function newContext(
  browser: Browser,
  baseURL: string,
  viewport: keyof typeof VIEWPORTS = 'desktop',
): Promise<BrowserContext> {
  return browser.newContext({ baseURL, viewport: VIEWPORTS[viewport], locale: 'en-GB', timezoneId: 'UTC' });
}

/** A full-page screenshot named `<name>-<width>.png` under SCREENSHOT_DIR. */
export async function screenshot(page: Page, name: string): Promise<string> {
  fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const width = page.viewportSize()?.width ?? 0;
  const file = path.join(SCREENSHOT_DIR, `${name}-${width}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: unknown; html: string }[];
}

/**
 * The serious and critical accessibility violations axe-core finds on the page as it is now.
 * axe's own source is injected into the page (no network).
 */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  const source = fs.readFileSync(path.join(ROOT, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');
  // Evaluated through the DevTools protocol, which the page's CSP (script-src 'self') does not block.
  await page.evaluate(source);
  const violations = await page.evaluate<AxeViolation[]>(`(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target, html: n.html })),
    }));
  })()`);
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/** An admin API token made with the browser's session cookie, for the setup a person would do elsewhere. */
export async function tokenFor(t: TestCloud, context: BrowserContext): Promise<string> {
  const session = (await context.cookies()).find((c) => c.name === 'os_session');
  if (!session) throw new Error('no session cookie in the browser');
  const answer = await t.http.post(
    '/v1/tokens',
    { label: 'e2e setup', scope: 'admin' },
    { cookie: `os_session=${session.value}` },
  );
  if (answer.status !== 201) throw new Error(`POST /v1/tokens: ${answer.status} ${answer.text}`);
  return answer.json.token as string;
}
