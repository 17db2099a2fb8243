import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { SystemClock, type Clock } from '../../cloud/src/clock.ts';
import { axeViolations, launchBrowser, newContext, screenshot } from '../helpers/browser.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../helpers/cloud.ts';
import { DATABASES } from '../helpers/databases.ts';
import { signInInBrowser } from '../helpers/dashboard.ts';
import { eventually } from '../helpers/eventually.ts';
import { closeClient, connectBridge } from '../helpers/mqtt.ts';
import { recipientPath } from '../cloud/report-schedules/recipients-helpers.ts';

jest.setTimeout(120_000);

describe.each(DATABASES)('dashboard: reports, settings, account (%s)', (db) => {
  let t: TestCloud;
  let browser: Browser;
  let user: SignedIn;
  let desktop: BrowserContext;
  let page: Page;
  let siteId: string;

  /** The page at `path` at 390 px, in a context holding the desktop's session: axe, screenshot. */
  async function onPhone(path: string, name: string, ready: (p: Page) => Promise<unknown>): Promise<void> {
    const phone = await newContext(browser, t.url, 'phone');
    await phone.addCookies(await desktop.cookies());
    const p = await phone.newPage();
    await p.goto(path);
    await ready(p);
    expect(await axeViolations(p)).toEqual([]);
    await screenshot(p, name);
    // No part of the page is wider than the phone (tables scroll inside their own box).
    expect(await p.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await phone.close();
  }

  async function checked(name: string): Promise<void> {
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, name);
  }

  beforeAll(async () => {
    // The account and its first token are made a year and a day ago, then time runs on from now.
    const system = new SystemClock();
    let offsetMicros = -366 * 86_400 * 1_000_000;
    const clock: Clock = { nowMicros: () => system.nowMicros() + offsetMicros };
    t = await startTestCloud({ db, clock, mqtt: true, env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    browser = await launchBrowser();
    user = await signUp(t, 'manager@example.com');
    offsetMicros = 0;
    const site = await t.http.post(
      '/v1/sites',
      { name: 'Cold store', vertical: 'food_service', timezone: 'Europe/Berlin' },
      { token: user.token },
    );
    expect(site.status).toBe(201);
    siteId = site.json.id as string;
    desktop = await newContext(browser, t.url);
    page = await desktop.newPage();
    await signInInBrowser(t, page, user.email);
  });
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it('creates a token with a scope, shows it once, lists it, and revokes it (then it gets 401)', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Settings' }).click();
    await page.waitForURL((u) => u.pathname === '/app/settings');
    await page.getByRole('heading', { name: 'API tokens' }).waitFor();
    await checked('settings-tokens-empty');

    await page.getByLabel('Label').fill('Grafana');
    await page.getByLabel('Scope').selectOption('write');
    await page.getByRole('button', { name: 'Create token' }).click();
    const shown = page.locator('.once code');
    await shown.waitFor();
    const token = (await shown.textContent())!;
    expect(token).toMatch(/^ua_live_[A-Za-z0-9]{43}$/);
    const row = page.locator('tr', { hasText: 'Grafana' });
    await row.waitFor();
    await expect(row.locator('td').nth(1).textContent()).resolves.toBe('write');
    // The API's consider_rotating: the token made a year and a day ago says so, the new one does not.
    await page.locator('tr', { hasText: 'tests' }).getByText('consider rotating').waitFor();
    expect(await row.getByText('consider rotating').count()).toBe(0);
    // Last used: the old token made the site a moment ago, the new one was never used.
    await expect(row.locator('td[data-label="Last used"]').textContent()).resolves.toBe('never');
    await expect(
      page.locator('tr', { hasText: 'tests' }).locator('td[data-label="Last used"]').textContent(),
    ).resolves.toMatch(/ ago$/);
    await checked('settings-tokens');
    await onPhone('/app/settings/tokens', 'settings-tokens', (p) =>
      p.locator('tr', { hasText: 'Grafana' }).waitFor(),
    );

    // The token works, and what it may do is its scope.
    expect((await t.http.get('/v1/sites', { token })).status).toBe(200);
    expect((await t.http.post('/v1/tokens', { label: 'x', scope: 'read' }, { token })).status).toBe(403);

    // Shown once: after a reload the list has it, the page no longer shows its value.
    await page.reload();
    await page.locator('tr', { hasText: 'Grafana' }).waitFor();
    expect(await page.content()).not.toContain(token);

    await page.getByRole('button', { name: 'Revoke token Grafana' }).click();
    await page.getByText('Revoke “Grafana”?').waitFor();
    await checked('settings-tokens-revoke');
    // The keyboard lands on the safe choice; one step back is the action.
    await expect(page.evaluate('document.activeElement.textContent')).resolves.toBe('Cancel');
    await page.keyboard.press('Shift+Tab');
    await expect(page.evaluate('document.activeElement.textContent')).resolves.toBe('Yes, revoke');
    await page.keyboard.press('Enter');
    await page.locator('tr', { hasText: 'Grafana' }).waitFor({ state: 'detached' });
    const after = await t.http.get('/v1/sites', { token });
    expect(after.status).toBe(401);
    expect(after.json.error).toMatchObject({ code: 'token_invalid' });
  });

  it('creates an MQTT bridge, downloads its bundle made in the browser, and revokes it', async () => {
    await page.goto('/app/settings');
    await page
      .getByRole('navigation', { name: 'Settings' })
      .getByRole('link', { name: 'MQTT bridges' })
      .click();
    await page.waitForURL((u) => u.pathname === '/app/settings/bridges');
    await page.getByLabel('Name').fill('Kitchen Pi');
    await page.getByRole('button', { name: 'Create bridge' }).click();
    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: /Download the bundle/ }).click();
    const file = await download;
    expect(file.suggestedFilename()).toBe('bridge-kitchen-pi.json');
    const bundle = JSON.parse(fs.readFileSync(await file.path(), 'utf8')) as Record<string, string>;
    expect(bundle.key_pem).toContain('-----BEGIN PRIVATE KEY-----');
    expect(bundle.cert_pem).toContain('-----BEGIN CERTIFICATE-----');
    expect(bundle.ca_pem).toContain('-----BEGIN CERTIFICATE-----');
    expect(bundle.mqtt_url).toMatch(/^mqtts:\/\//);
    expect(bundle.site_id).toBe(siteId);
    const row = page.locator('tr', { hasText: 'Kitchen Pi' });
    await row.getByText('Not connected').waitFor();

    // The downloaded bundle connects as it is; the page shows the bridge connected.
    const client = await connectBridge(t, {
      cert_pem: bundle.cert_pem!,
      key_pem: bundle.key_pem!,
      ca_pem: bundle.ca_pem!,
    });
    const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
    await page.reload();
    await row.locator('.badge', { hasText: /^\W*Connected$/ }).waitFor();
    await checked('settings-bridges');
    await onPhone('/app/settings/bridges', 'settings-bridges', (p) =>
      p.locator('tr', { hasText: 'Kitchen Pi' }).waitFor(),
    );

    await page.getByRole('button', { name: 'Revoke bridge Kitchen Pi' }).click();
    await page.getByRole('button', { name: 'Yes, revoke' }).click();
    await row.waitFor({ state: 'detached' });
    // Revoked: the live connection is dropped.
    await closed;
    await closeClient(client);
    const listed = await t.http.get('/v1/bridges', { token: user.token });
    expect(listed.json.data).toEqual([]);
  });

  it('requests a report for a month, shows its progress, and downloads the PDF', async () => {
    await page.goto('/app/');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Reports' }).click();
    await page.waitForURL((u) => u.pathname === '/app/reports');
    await page.getByRole('heading', { name: 'Request a report' }).waitFor();
    await checked('reports-empty');
    const form = page.getByRole('form', { name: 'Request a report' });
    await form.getByLabel('Month').fill('2026-03');
    await form.getByLabel('Language').selectOption('de');
    await form.getByRole('button', { name: 'Request report' }).click();
    const link = page.getByRole('link', { name: /Download PDF/ });
    await link.waitFor({ timeout: 60_000 });

    // The period is March in the site's time, with the offsets of both ends (CET, then CEST).
    const reports = await t.http.get('/v1/reports', { token: user.token });
    expect(reports.json.data[0]).toMatchObject({
      site_id: siteId,
      template: 'haccp_monthly',
      language: 'de',
      state: 'ready',
      period: { from: '2026-02-28T23:00:00Z', to: '2026-03-31T22:00:00Z' },
    });
    const download = page.waitForEvent('download');
    await link.click();
    const file = await download;
    expect(file.suggestedFilename()).toMatch(/^haccp_monthly-.*2026-03\.pdf$/);
    expect(
      fs
        .readFileSync(await file.path())
        .subarray(0, 5)
        .toString(),
    ).toBe('%PDF-');

    // A schedule: created, listed, deleted.
    const asked = t.nextMail('qa@example.com');
    await page.getByLabel('Recipients').fill('manager@example.com, qa@example.com');
    await page.getByRole('button', { name: 'Create schedule' }).click();
    const schedule = page.locator('tr', { hasText: 'qa@example.com' });
    await schedule.waitFor();
    // The account's own user receives reports at once; another address once it has confirmed.
    await expect(schedule.locator('li[data-status="confirmed"]').textContent()).resolves.toBe(
      'manager@example.com',
    );
    await expect(schedule.locator('li[data-status="pending"]').textContent()).resolves.toBe(
      'qa@example.com awaiting confirmation',
    );
    await checked('reports-schedule-pending');
    // qa opens the link of the mail that asks, in a browser of their own, and agrees.
    const recipient = await newContext(browser, t.url);
    const qaPage = await recipient.newPage();
    await qaPage.goto(recipientPath((await asked).text));
    await qaPage.getByRole('heading', { name: 'Scheduled reports for qa@example.com' }).waitFor();
    expect(await axeViolations(qaPage)).toEqual([]);
    await screenshot(qaPage, 'report-recipient');
    await qaPage.getByRole('button', { name: 'Receive these reports' }).click();
    await qaPage.getByText('Thank you: you will receive these reports.').waitFor();
    await recipient.close();
    await page.reload();
    await schedule.locator('li[data-status="confirmed"]', { hasText: 'qa@example.com' }).waitFor();
    // The next run is shown in the site's time (Europe/Berlin), named, not in the browser's (UTC).
    await expect(schedule.locator('td[data-label="Next"]').textContent()).resolves.toMatch(/\bCES?T\b/);
    await checked('reports');
    await onPhone('/app/reports', 'reports', (p) => p.getByRole('link', { name: /Download PDF/ }).waitFor());
    await schedule.getByRole('button', { name: /^Delete schedule/ }).click();
    await page.getByRole('button', { name: 'Yes, delete' }).click();
    await schedule.waitFor({ state: 'detached' });
    expect((await t.http.get('/v1/report-schedules', { token: user.token })).json.data).toEqual([]);
  });

  it('shows the API’s message next to a field: a schedule without recipients', async () => {
    await page.getByRole('button', { name: 'Create schedule' }).click();
    await page.locator('#schedule-recipients-error').waitFor();
    expect(await axeViolations(page)).toEqual([]);
    // A bad address among good ones is named.
    await page.getByLabel('Recipients').fill('qa@example.com, chef-at-example.com');
    await page.getByRole('button', { name: 'Create schedule' }).click();
    await page
      .locator('#schedule-recipients-error', { hasText: 'chef-at-example.com: must be an e-mail address' })
      .waitFor();
  });

  it('creates a webhook with its secret shown once, and lists its deliveries', async () => {
    await page.goto('/app/settings/webhooks');
    await page.getByLabel('URL').fill('http://127.0.0.1:9/hook');
    await page.getByRole('checkbox', { name: /report\.ready/ }).check();
    await page.getByRole('button', { name: 'Create webhook' }).click();
    const secret = await page.locator('.once code').textContent();
    expect(secret).toMatch(/^whsec_/);
    const webhookId = await page.locator('[data-webhook]').getAttribute('data-webhook');

    // A report made now is announced to it; the receiver does not answer, so the attempt fails.
    const report = await t.http.post(
      '/v1/reports',
      {
        site_id: siteId,
        template: 'channel_summary',
        language: 'en',
        period: { from: '2026-04-01T00:00:00+02:00', to: '2026-05-01T00:00:00+02:00' },
      },
      { token: user.token },
    );
    expect(report.status).toBe(202);
    await eventually(
      async () =>
        (await t.http.get(`/v1/webhooks/${webhookId}/deliveries`, { token: user.token })).json.data[0]
          ?.attempts?.length > 0,
      'a delivery attempt',
      60_000,
    );
    await page.getByRole('button', { name: 'Show deliveries' }).click();
    const delivery = page.locator(`#deliveries-${webhookId} tbody tr`).first();
    await delivery.getByText('report.ready').waitFor();
    await delivery.locator('ol.attempts li').first().waitFor();
    await checked('settings-webhooks');
    await onPhone('/app/settings/webhooks', 'settings-webhooks', (p) =>
      p.getByText('http://127.0.0.1:9/hook').waitFor(),
    );
  });

  it('creates an integration (URL and token shown once), rotates its token, and deletes it', async () => {
    await page.goto('/app/settings/integrations');
    const form = page.getByRole('form', { name: 'New integration' });
    await form.getByLabel('Kind').selectOption('chirpstack');
    await form.getByLabel('Name').fill('LoRa north');
    await form.getByRole('button', { name: 'Create integration' }).click();
    const token = await page.locator('.once .copy-value', { hasText: 'Token' }).locator('code').textContent();
    const url = await page.locator('.once .copy-value', { hasText: 'URL' }).locator('code').textContent();
    expect(token).toMatch(/^whk_/);
    expect(url).toMatch(/^http:\/\/.*\/v1\//);
    const row = page.locator('tr', { hasText: 'LoRa north' });
    await row.waitFor();
    await checked('settings-integrations');
    await onPhone('/app/settings/integrations', 'settings-integrations', (p) =>
      p.locator('tr', { hasText: 'LoRa north' }).waitFor(),
    );

    await row.getByRole('button', { name: 'Rotate token of LoRa north' }).click();
    await row.getByRole('button', { name: 'Yes, rotate' }).click();
    await page.getByText('New token for “LoRa north”.').waitFor();
    const rotated = await page
      .locator('.once .copy-value', { hasText: 'Token' })
      .locator('code')
      .textContent();
    expect(rotated).toMatch(/^whk_/);
    expect(rotated).not.toBe(token);

    await row.getByRole('button', { name: 'Delete integration LoRa north' }).click();
    await row.getByRole('button', { name: 'Yes, delete' }).click();
    await row.waitFor({ state: 'detached' });
    expect((await t.http.get('/v1/integrations', { token: user.token })).json.data).toEqual([]);
  });

  it('filters the audit log by kind, and downloads the account export', async () => {
    await page.goto('/app/settings/audit');
    await page.locator('tr[data-audit="token.revoked"]').waitFor();
    await page.getByLabel('Kind').fill('bridge.created');
    await page.getByRole('button', { name: 'Show entries' }).click();
    await page.locator('tr[data-audit="token.revoked"]').waitFor({ state: 'detached' });
    expect(await page.locator('tbody tr').count()).toBe(1);
    await page.locator('tr[data-audit="bridge.created"]').waitFor();
    await checked('settings-audit');
    await onPhone('/app/settings/audit', 'settings-audit', (p) =>
      p.locator('tr[data-audit="site.created"]').waitFor(),
    );

    // Paged: three entries a page, older and back.
    await page.goto('/app/settings/audit?limit=3');
    const rows = page.locator('tbody tr');
    await rows.nth(2).waitFor();
    const first = await rows.allTextContents();
    expect(first).toHaveLength(3);
    await page.getByRole('button', { name: 'Older entries' }).click();
    await page.getByRole('button', { name: 'Newer entries' }).waitFor();
    await eventually(async () => {
      const now = await rows.allTextContents();
      return now.length > 0 && now[0] !== first[0];
    }, 'the older page');
    await page.getByRole('button', { name: 'Newer entries' }).click();
    await eventually(async () => (await rows.allTextContents())[0] === first[0], 'the newer page again');
    expect(await rows.allTextContents()).toEqual(first);

    // A time filter: nothing from tomorrow on.
    await page
      .getByLabel('From (your time)')
      .fill(new Date(Date.now() + 86_400_000).toISOString().slice(0, 16));
    await page.getByRole('button', { name: 'Show entries' }).click();
    await page.getByText('No entries match.').waitFor();

    await page.goto('/app/settings/export');
    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Download the export (ZIP)' }).click();
    const file = await download;
    expect(file.suggestedFilename()).toMatch(/^export-acc_.*\.zip$/);
    expect(
      fs
        .readFileSync(await file.path())
        .subarray(0, 2)
        .toString(),
    ).toBe('PK');
    await page.getByText(/^Saved as/).waitFor();
    await checked('settings-export');
    await onPhone('/app/settings/export', 'settings-export', (p) =>
      p.getByRole('button', { name: 'Download the export (ZIP)' }).waitFor(),
    );
  });

  it('signs out everywhere: another browser’s session ends too', async () => {
    const other = await newContext(browser, t.url, 'phone');
    const otherPage = await other.newPage();
    // A deep link: the sign-in returns to the account page.
    await signInInBrowser(t, otherPage, user.email, { from: '/app/account' });
    await otherPage.getByRole('heading', { name: 'Sessions' }).waitFor();
    expect(await axeViolations(otherPage)).toEqual([]);
    await screenshot(otherPage, 'account');

    await page.goto('/app/account');
    await page.getByRole('heading', { name: 'Users' }).waitFor();
    await page.getByRole('cell', { name: user.email }).waitFor();
    await checked('account');
    await page.getByRole('button', { name: 'Sign out everywhere' }).click();
    await page.getByRole('button', { name: 'Yes, sign out everywhere' }).click();
    await page.waitForURL((u) => u.pathname === '/app/sign-in');

    // The other browser is signed out on its next request.
    await otherPage.reload();
    await otherPage.waitForURL((u) => u.pathname === '/app/sign-in');
    const cookie = (await other.cookies()).find((c) => c.name === 'os_session');
    const me = await t.http.get(
      '/app/api/accounts/me',
      cookie ? { cookie: `os_session=${cookie.value}` } : {},
    );
    expect(me.status).toBe(401);
    // API tokens are not sessions: they keep working.
    expect((await t.http.get('/v1/sites', { token: user.token })).status).toBe(200);
    await other.close();
  });
});
