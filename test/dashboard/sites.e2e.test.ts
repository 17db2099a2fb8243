import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Browser, Page } from 'playwright-core';
import { axeViolations, launchBrowser, newContext, screenshot } from '../helpers/browser.ts';
import { startTestCloud, type TestCloud } from '../helpers/cloud.ts';
import { DATABASES } from '../helpers/databases.ts';
import { signInInBrowser } from '../helpers/dashboard.ts';
import { closeClient, connectBridge, nextMessage, type BridgeBundle } from '../helpers/mqtt.ts';

jest.setTimeout(120_000);

/** Sends readings as a device would: `POST /v1/ingest` with its token, from outside the browser. */
async function ingest(t: TestCloud, token: string, device: string, measurements: object[], ts?: Date) {
  const res = await fetch(`${t.url}/v1/ingest`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ device, ...(ts ? { ts: ts.toISOString() } : {}), measurements }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** A JSON call through the dashboard's API with the page's session, as the app makes it. */
async function appApi<T>(page: Page, method: string, path: string, body?: unknown): Promise<T> {
  return page.evaluate(
    async ([method, path, body]) => {
      const res = await fetch(`/app/api${path}`, {
        method,
        headers: { 'Content-Type': 'application/json', 'X-Requested-With': 'XMLHttpRequest' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return res.status === 204 ? null : await res.json();
    },
    [method, path, body] as const,
  ) as Promise<T>;
}

/** Axe finds nothing serious, and the page is saved as a screenshot to be looked at. */
async function check(page: Page, name: string) {
  expect(await axeViolations(page)).toEqual([]);
  await screenshot(page, name);
}

/** The page has not been loaded again since `markUnreloaded` (its window survives). */
async function markUnreloaded(page: Page) {
  await page.evaluate(() => {
    (globalThis as unknown as { unreloaded: boolean }).unreloaded = true;
  });
}
async function stillUnreloaded(page: Page) {
  return page.evaluate(() => (globalThis as unknown as { unreloaded?: boolean }).unreloaded === true);
}

const waitLive = (page: Page) => page.locator('.live-status.live-live').waitFor();

describe.each(DATABASES)('dashboard sites and devices (%s)', (db) => {
  let t: TestCloud;
  let browser: Browser;
  beforeAll(async () => {
    t = await startTestCloud({ db, mqtt: true });
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it('creates a site and a device, shows readings live, and manages the device', async () => {
    const email = 'manager@example.com';
    const context = await newContext(browser, t.url);
    const page = await context.newPage();
    await signInInBrowser(t, page, email);
    await page.getByText('No sites yet').waitFor();
    await check(page, 'overview-empty');

    // Create a site in the UI.
    await page.getByRole('link', { name: 'Add a site' }).click();
    await page.getByRole('heading', { name: 'Add a site' }).waitFor();
    await page.getByRole('textbox', { name: 'Name' }).fill('Cold room');
    await page.getByLabel('Kind of site').selectOption('food_service');
    await page.getByLabel('Time zone').selectOption('Europe/Berlin');
    await check(page, 'site-new');
    await page.getByRole('button', { name: 'Create site' }).click();
    await page.waitForURL(/\/app\/sites\/site_[A-Za-z0-9]+$/);
    const siteId = new URL(page.url()).pathname.split('/').pop()!;
    await page.getByRole('heading', { name: 'Cold room' }).waitFor();
    await check(page, 'site-empty');

    // Add a device in the UI: the token and URL are shown once.
    await page.getByRole('link', { name: 'Add a device' }).first().click();
    await page.getByRole('heading', { name: 'Add a device to Cold room' }).waitFor();
    await page.getByRole('radio', { name: /http-generic/ }).check();
    await page.getByLabel('Device ID').fill('fridge-1');
    await page.getByLabel('Name', { exact: true }).fill('Walk-in fridge');
    await check(page, 'device-new');
    await page.getByRole('button', { name: 'Add device' }).click();
    await page.getByRole('heading', { name: 'Device added: Walk-in fridge' }).waitFor();
    const token = (await page
      .locator('.copy-value', { hasText: 'Device token' })
      .locator('code')
      .textContent())!;
    expect(token).toMatch(/^ds_live_/);
    const url = await page.locator('.copy-value', { hasText: 'Ingest URL' }).locator('code').textContent();
    // BASE_URL (the cloud's public address) names it; the test cloud keeps the default host.
    expect(url).toMatch(/^http:\/\/[^/]+\/v1\/ingest$/);
    await page.getByText('Set up the device').waitFor();
    await check(page, 'device-new-token');
    // The copy button puts the token on the clipboard.
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: t.url });
    const copy = page.getByRole('button', { name: 'Copy Device token' });
    await copy.click();
    await copy.getByText('Copied').waitFor();
    expect(await page.evaluate<string>('navigator.clipboard.readText()')).toBe(token);

    // The site page, live: a first reading creates the sensors and sets the device online.
    await page.getByRole('link', { name: /Done: back to Cold room/ }).click();
    await page.getByRole('heading', { name: 'Cold room' }).waitFor();
    await waitLive(page);
    await markUnreloaded(page);
    const device = page.locator('tr[data-device]', { hasText: 'Walk-in fridge' });
    await device.getByText('Offline').waitFor();
    expect(
      (
        await ingest(t, token, 'fridge-1', [
          { type: 'temperature', value: 3.5 },
          { type: 'battery', value: 87 },
          { type: 'signal', value: -61 },
        ])
      ).status,
    ).toBe(200);
    const temperature = page.locator('tr[data-sensor]', { hasText: 'temperature' });
    await temperature.locator('td.value', { hasText: '3.5 °C' }).waitFor();
    await temperature.getByText('OK').waitFor();
    await device.getByText('Online').waitFor();
    await device.getByText('87.0 %').waitFor();
    await device.getByText('-61.0 dBm').waitFor();
    // Above 5 °C on a food-service site: grace first (30 minutes), live.
    await ingest(t, token, 'fridge-1', [{ type: 'temperature', value: 9 }]);
    await temperature.locator('td.value', { hasText: '9.0 °C' }).waitFor();
    await temperature.getByText('Grace').waitFor();
    expect(await stillUnreloaded(page)).toBe(true);
    await check(page, 'site');

    // Site delete while it has a device: not offered; the card says what to do first.
    const deleteCard = page.getByRole('region', { name: 'Delete the site' });
    await deleteCard.getByText('It still has 1 device. Move each to another site or delete it').waitFor();
    expect(await deleteCard.getByRole('button').count()).toBe(0);
    await check(page, 'site-not-empty');

    // The overview, live: the alarm appears without a reload (grace set to 0 through the API).
    await page.getByRole('link', { name: 'Overview' }).first().click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await waitLive(page);
    await markUnreloaded(page);
    const overviewRow = page.locator('tr[data-sensor]', { hasText: 'temperature' });
    await overviewRow.getByText('Grace').waitFor();
    const sensorId = (await overviewRow.getAttribute('data-sensor'))!;
    // An excursion keeps the grace it started under: back in range first, then out with grace 0.
    await appApi(page, 'PATCH', `/sensors/${sensorId}`, { grace_min: 0 });
    await ingest(t, token, 'fridge-1', [{ type: 'temperature', value: 4.2 }]);
    await overviewRow.getByText('OK').waitFor();
    await ingest(t, token, 'fridge-1', [{ type: 'temperature', value: 9.5 }]);
    await overviewRow.locator('td.value', { hasText: '9.5 °C' }).waitFor();
    await overviewRow.getByText('Alarm').waitFor();
    await page.getByRole('heading', { name: 'Open alarms (1)' }).waitFor();
    await page.locator('.alarm-item', { hasText: 'Walk-in fridge · temperature' }).waitFor();
    expect(await stillUnreloaded(page)).toBe(true);
    await check(page, 'overview-alarm');
    // Back in range: the alarm resolves live.
    await ingest(t, token, 'fridge-1', [{ type: 'temperature', value: 4 }]);
    await overviewRow.getByText('OK').waitFor();
    await page.getByRole('heading', { name: /Open alarms/ }).waitFor({ state: 'detached' });
    expect(await stillUnreloaded(page)).toBe(true);

    // The device page: edit, identify, rotate the token (shown once), move.
    await page.goto(`/app/sites/${siteId}`);
    await page.getByRole('link', { name: 'Walk-in fridge' }).click();
    await page.getByRole('heading', { name: 'Walk-in fridge' }).waitFor();
    await page.getByRole('link', { name: 'temperature' }).waitFor();
    expect(await page.getByRole('link', { name: 'temperature' }).getAttribute('href')).toBe(
      `/app/sensors/${sensorId}`,
    );
    await check(page, 'device');
    await page.getByLabel('Name', { exact: true }).fill('Walk-in fridge A');
    await page.getByLabel('Notes', { exact: true }).fill('Back of the kitchen');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByRole('heading', { name: 'Walk-in fridge A' }).waitFor();
    await page.getByText('This model cannot blink on request.').waitFor();

    await page.getByRole('button', { name: 'Rotate token…' }).click();
    await page.getByRole('button', { name: 'Yes, issue a new token' }).click();
    await page.getByRole('heading', { name: 'New token' }).waitFor();
    const newToken = (await page
      .locator('.copy-value', { hasText: 'Device token' })
      .locator('code')
      .textContent())!;
    expect(newToken).not.toBe(token);
    expect((await ingest(t, token, 'fridge-1', [{ type: 'temperature', value: 4 }])).status).toBe(401);
    expect((await ingest(t, newToken, 'fridge-1', [{ type: 'temperature', value: 4.5 }])).status).toBe(200);
    await page.locator('tr[data-sensor]', { hasText: 'temperature' }).getByText('4.5 °C').waitFor();
    await check(page, 'device-token-rotated');

    const other = await appApi<{ id: string }>(page, 'POST', '/sites', {
      name: 'Pharmacy',
      vertical: 'pharma',
    });
    await page.reload();
    await page.getByLabel('New site').selectOption(other.id);
    await page.getByRole('button', { name: 'Move device' }).click();
    await page.getByText('Moved to Pharmacy.').waitFor();
    await page.getByRole('link', { name: 'Pharmacy' }).first().waitFor();

    // Phone-sized screenshots of every page, checked by axe too.
    const phone = await newContext(browser, t.url, 'phone');
    const small = await phone.newPage();
    await signInInBrowser(t, small, email);
    await small.locator('tr[data-sensor]').first().waitFor();
    await check(small, 'overview');
    await small.goto('/app/sites/new');
    await small.getByRole('heading', { name: 'Add a site' }).waitFor();
    await check(small, 'site-new');
    await small.goto(`/app/sites/${other.id}`);
    await small.locator('tr[data-sensor]').first().waitFor();
    await check(small, 'site');
    // Each row is a block on the phone: the state is on screen, not scrolled out of sight.
    const badge = await small.locator('tr[data-sensor] .badge').first().boundingBox();
    expect(badge!.x + badge!.width).toBeLessThanOrEqual(390);
    await small.goto(`/app/sites/${other.id}/devices/new`);
    await small.getByRole('radio', { name: /shelly-ht-gen1/ }).check();
    await small.getByLabel('Device ID').fill('shellyht-01');
    await small.getByLabel('Name', { exact: true }).fill('Medicine fridge');
    await check(small, 'device-new');
    await small.getByRole('button', { name: 'Add device' }).click();
    // A Shelly URL model: the complete URL to paste into the device, token included.
    const shellyUrl = await small
      .locator('.copy-value', { hasText: 'Shelly URL' })
      .locator('code')
      .textContent();
    expect(shellyUrl).toMatch(
      new RegExp(`^http://[^/]+/v1/ingest/shelly\\?token=ds_live_[A-Za-z0-9]+&device=shellyht-01&temp=`),
    );
    await small.getByText('Report sensor values').waitFor();
    await check(small, 'device-new-token');
    await small.getByRole('link', { name: 'Open the device' }).click();
    await small.getByRole('heading', { name: 'Medicine fridge' }).waitFor();
    await check(small, 'device');
    await phone.close();

    // Delete the moved device with confirmation; then its old, empty site can go.
    await page.getByRole('button', { name: 'Delete device…' }).click();
    await page.getByRole('button', { name: 'Yes, delete the device' }).click();
    await page.waitForURL((u) => u.pathname === `/app/sites/${other.id}`);
    await page.getByRole('heading', { name: 'Pharmacy' }).waitFor();
    await page.goto(`/app/sites/${siteId}`);
    await page.getByText('No devices on this site').waitFor();
    await page.getByRole('button', { name: 'Delete site…' }).click();
    // The keyboard lands on the safe choice.
    expect(await page.locator('button:focus').textContent()).toBe('Keep it');
    await page.getByRole('button', { name: 'Yes, delete the site' }).click();
    await page.waitForURL((u) => u.pathname === '/app/');
    await page.getByRole('link', { name: 'Pharmacy' }).waitFor();
    expect(await page.getByRole('link', { name: 'Cold room' }).count()).toBe(0);
    await context.close();
  });

  it('shares a device on the public map under a nickname and position, and takes it off again', async () => {
    const context = await newContext(browser, t.url);
    const page = await context.newPage();
    await signInInBrowser(t, page, 'sharer@example.com');
    const site = await appApi<{ id: string }>(page, 'POST', '/sites', { name: 'Roof', vertical: 'generic' });
    const device = await appApi<{ id: string; ingest_token: string }>(page, 'POST', '/devices', {
      site_id: site.id,
      local_id: 'roof-1',
      name: 'Roof sensor',
      model: 'http-generic',
    });
    await ingest(t, device.ingest_token, 'roof-1', [{ type: 'temperature', value: 12.5 }]);
    const pins = async () => (await (await fetch(`${t.url}/api/public/sensors`)).json()) as object[];

    await page.goto(`/app/devices/${device.id}`);
    const card = page.getByRole('region', { name: 'Public map' });
    await card.getByText('Not shown on the public map.', { exact: true }).waitFor();
    // Shown needs a nickname, a place and a position: the cloud's message goes beside each field.
    await card.getByLabel('Show on the public map').check();
    await card.getByLabel('Nickname').fill('Kreuzberg roof');
    await card.getByRole('button', { name: 'Save map settings' }).click();
    await card.locator('#public-place-error').waitFor();
    await card.locator('#public-lat-error').waitFor();
    await card.locator('#public-lon-error').waitFor();
    expect(await pins()).toEqual([]);
    await card.getByLabel('Place').fill('Berlin');
    await card.getByLabel('Latitude').fill('52,5'); // a decimal comma, as many people type it
    await card.getByLabel('Longitude').fill('13.4');
    await card.getByRole('button', { name: 'Save map settings' }).click();
    await card.getByText('Shown on the public map as “Kreuzberg roof” (Berlin).').waitFor();
    await card.getByText('Saved: shown on the public map.').waitFor();
    await check(page, 'device-public');
    expect(await pins()).toEqual([
      expect.objectContaining({
        nickname: 'Kreuzberg roof',
        locationName: 'Berlin',
        lat: 52.5,
        lon: 13.4,
        value: 12.5,
      }),
    ]);

    // After a reload the form shows what is shared; unticked and saved, the pin is gone at once.
    await page.reload();
    await expect(card.getByLabel('Nickname').inputValue()).resolves.toBe('Kreuzberg roof');
    await card.getByLabel('Show on the public map').uncheck();
    await card.getByRole('button', { name: 'Save map settings' }).click();
    await card.getByText('Saved: not shown on the public map.').waitFor();
    await card.getByText('Not shown on the public map.', { exact: true }).waitFor();
    expect(await pins()).toEqual([]);
    await context.close();
  });

  it('renames a site and changes its time zone; shows the API validation message next to the field', async () => {
    const context = await newContext(browser, t.url);
    const page = await context.newPage();
    await signInInBrowser(t, page, 'renamer@example.com');
    const site = await appApi<{ id: string }>(page, 'POST', '/sites', {
      name: 'Kitchen',
      vertical: 'food_service',
    });
    await page.goto(`/app/sites/${site.id}`);
    await page.getByRole('heading', { name: 'Kitchen', exact: true }).waitFor();
    await page.getByRole('textbox', { name: 'Name' }).fill('');
    await page.getByRole('button', { name: 'Save' }).click();
    const error = page.locator('#site-name-error');
    await error.waitFor();
    expect(await page.getByRole('textbox', { name: 'Name' }).getAttribute('aria-describedby')).toContain(
      'site-name-error',
    );
    await page.getByRole('textbox', { name: 'Name' }).fill('Main kitchen');
    await page.getByLabel('Time zone', { exact: true }).selectOption('Europe/Lisbon');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('heading', { name: 'Main kitchen' }).waitFor();
    await page.getByText('Saved.').waitFor();
    const saved = await appApi<{ name: string; timezone: string }>(page, 'GET', `/sites/${site.id}`);
    expect(saved).toMatchObject({ name: 'Main kitchen', timezone: 'Europe/Lisbon' });
    await context.close();
  });

  it('reconnects after the stream breaks and loads what it missed meanwhile', async () => {
    const context = await newContext(browser, t.url);
    const page = await context.newPage();
    await signInInBrowser(t, page, 'reconnect@example.com');
    const site = await appApi<{ id: string }>(page, 'POST', '/sites', {
      name: 'Bar',
      vertical: 'food_service',
    });
    const device = await appApi<{ ingest_token: string }>(page, 'POST', '/devices', {
      site_id: site.id,
      local_id: 'bar-fridge',
      name: 'Bar fridge',
      model: 'http-generic',
    });
    await ingest(t, device.ingest_token, 'bar-fridge', [{ type: 'temperature', value: 3 }]);
    await page.goto(`/app/sites/${site.id}`);
    await waitLive(page);
    await markUnreloaded(page);
    // The cloud ends every stream (as a restart or a proxy would); a reading arrives while the
    // browser is away, so no event carries it.
    t.cloud.services.liveStreams.closeAll();
    await page.locator('.live-status.live-offline').waitFor();
    await ingest(t, device.ingest_token, 'bar-fridge', [{ type: 'temperature', value: 2.5 }]);
    await waitLive(page);
    const row = page.locator('tr[data-sensor]', { hasText: 'temperature' });
    await row.locator('td.value', { hasText: '2.5 °C' }).waitFor();
    expect(await stillUnreloaded(page)).toBe(true);
    await context.close();
  });

  it('shows the MQTT bridge steps for a gateway, with the topic of its account and device ID', async () => {
    const context = await newContext(browser, t.url);
    const page = await context.newPage();
    await signInInBrowser(t, page, 'gateway@example.com');
    const me = await appApi<{ id: string }>(page, 'GET', '/accounts/me');
    const site = await appApi<{ id: string }>(page, 'POST', '/sites', { name: 'Depot', vertical: 'pharma' });
    await page.goto(`/app/sites/${site.id}/devices/new`);
    await page.getByRole('radio', { name: /gateway-pi/ }).check();
    await page.getByLabel('Device ID').fill('depot-pi');
    await page.getByLabel('Name', { exact: true }).fill('Depot gateway');
    await page.getByRole('button', { name: 'Add device' }).click();
    await page.getByRole('heading', { name: 'Device added: Depot gateway' }).waitFor();
    await page.getByText('/etc/sensor-gateway/bridge.json').waitFor();
    await page.getByText(`service/${me.id}/depot-pi`).waitFor();
    expect(await page.getByRole('link', { name: 'Settings' }).count()).toBeGreaterThan(1);
    await check(page, 'device-new-gateway');
    await context.close();
  });

  it('shows every sensor state on the overview by label and shape as well as colour, most urgent first', async () => {
    const context = await newContext(browser, t.url);
    const page = await context.newPage();
    await signInInBrowser(t, page, 'states@example.com');
    const site = await appApi<{ id: string }>(page, 'POST', '/sites', {
      name: 'Deli',
      vertical: 'food_service',
    });
    const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000);
    // Food service: band 0..5 °C, grace 30 minutes, no data after 60 minutes.
    const cases = [
      { name: 'Counter', value: 3.5, at: minutesAgo(1) }, // ok
      { name: 'Display', value: 9, at: minutesAgo(1) }, // grace: out of the band for a minute
      { name: 'Freezer', value: 9, at: minutesAgo(40) }, // alarm: out of the band beyond the grace
      { name: 'Back room', value: 3.5, at: minutesAgo(1) }, // silenced below
      { name: 'Cellar', value: 3.5, at: minutesAgo(120) }, // no data for two hours
    ];
    for (const [i, c] of cases.entries()) {
      const device = await appApi<{ id: string; ingest_token: string }>(page, 'POST', '/devices', {
        site_id: site.id,
        local_id: `deli-${i}`,
        name: c.name,
        model: 'http-generic',
      });
      expect(
        (await ingest(t, device.ingest_token, `deli-${i}`, [{ type: 'temperature', value: c.value }], c.at))
          .status,
      ).toBe(200);
      if (c.name === 'Back room') {
        const sensors = await appApi<{ data: { id: string }[] }>(
          page,
          'GET',
          `/devices/${device.id}/sensors`,
        );
        const silence = await appApi<{ id: string }>(
          page,
          'POST',
          `/sensors/${sensors.data[0]!.id}/silence`,
          {
            from: minutesAgo(5).toISOString(),
            to: new Date(Date.now() + 3600_000).toISOString(),
            reason: 'cleaning',
          },
        );
        expect(silence.id).toMatch(/^sil_/);
      }
    }
    // The rule engine judges the new readings and silences before the page is read.
    await t.cloud.services.rules.drain();
    for (const viewport of ['desktop', 'phone'] as const) {
      const ctx = viewport === 'desktop' ? context : await newContext(browser, t.url, 'phone');
      if (ctx !== context) await ctx.addCookies(await context.cookies());
      const p = ctx === context ? page : await ctx.newPage();
      await p.goto('/app/');
      const rows = p.locator('tr[data-sensor]');
      await rows.nth(4).waitFor();
      // A string: the tests' TypeScript has no DOM types; the page runs it as it is.
      const seen = await p.evaluate<{ device: string; badge: string; look: string }[]>(`
        Array.from(document.querySelectorAll('tr[data-sensor]'), (tr) => {
          const badge = tr.querySelector('.badge');
          const style = getComputedStyle(badge);
          return {
            device: tr.textContent,
            badge: badge.textContent.trim(),
            look: style.color + '|' + style.backgroundColor + '|' + style.borderStyle,
          };
        })`);
      expect(seen.map((r) => r.badge)).toEqual(['▲ Alarm', '◆ Grace', '○ No data', '■ Silenced', '● OK']);
      expect(
        seen.map((r) =>
          ['Freezer', 'Display', 'Cellar', 'Back room', 'Counter'].find((n) => r.device.includes(n)),
        ),
      ).toEqual(['Freezer', 'Display', 'Cellar', 'Back room', 'Counter']);
      // Five looks for five states, besides five shapes and five labels.
      expect(new Set(seen.map((r) => r.look)).size).toBe(5);
      await p.locator('.state-counts').waitFor();
      await check(p, 'overview-states');
      if (ctx !== context) await ctx.close();
    }
    await context.close();
  });

  it('identifies a device through the MQTT bridge of its site, and says when none is connected', async () => {
    const context = await newContext(browser, t.url);
    const page = await context.newPage();
    await signInInBrowser(t, page, 'identify@example.com');
    const site = await appApi<{ id: string }>(page, 'POST', '/sites', { name: 'Store', vertical: 'generic' });
    const device = await appApi<{ id: string }>(page, 'POST', '/devices', {
      site_id: site.id,
      local_id: 'relay-1',
      name: 'Relay',
      model: 'mqtt-generic',
    });
    const bundle = await appApi<BridgeBundle>(page, 'POST', '/bridges', {
      site_id: site.id,
      name: 'Store Pi',
    });
    await page.goto(`/app/devices/${device.id}`);
    await page.getByRole('heading', { name: 'Relay' }).waitFor();
    await page.getByRole('button', { name: 'Identify' }).click();
    await page.getByText('Not sent: no MQTT bridge of this site is connected right now.').waitFor();

    const bridge = await connectBridge(t, bundle);
    try {
      // topic_root ends with a slash: `service/<account_id>/`.
      await bridge.subscribeAsync(`${bundle.topic_root}+/cmd/#`, { qos: 1 });
      const command = nextMessage(bridge, (topic) => topic.endsWith('/cmd/identify'));
      await page.getByRole('button', { name: 'Identify' }).click();
      await page.getByText('Sent: the device blinks for 30 seconds.').waitFor();
      expect((await command).topic).toBe(`${bundle.topic_root}relay-1/cmd/identify`);
      await check(page, 'device-identified');
    } finally {
      await closeClient(bridge);
    }
    await context.close();
  });

  it('moves a device from a chosen moment (effective_at), plans a move, and shows a refused time beside the field', async () => {
    const context = await newContext(browser, t.url);
    const page = await context.newPage();
    await signInInBrowser(t, page, 'mover@example.com');
    const make = (name: string) =>
      appApi<{ id: string }>(page, 'POST', '/sites', { name, vertical: 'generic' });
    const first = await make('First shop');
    const second = await make('Second shop');
    const third = await make('Third shop');
    const device = await appApi<{ id: string }>(page, 'POST', '/devices', {
      site_id: first.id,
      local_id: 'roaming-1',
      name: 'Roaming fridge',
      model: 'http-generic',
    });
    // The browser's zone is UTC, so local wall time is the UTC time without its zone.
    const local = (d: Date) => d.toISOString().slice(0, 16);
    const twoHoursAgo = new Date(Math.floor((Date.now() - 2 * 3600_000) / 60_000) * 60_000);
    await page.goto(`/app/devices/${device.id}`);
    await page.getByRole('heading', { name: 'Roaming fridge' }).waitFor();
    await page.getByLabel('New site').selectOption(second.id);
    await page.getByLabel('From (your local time)').fill(local(twoHoursAgo));
    await page.getByRole('button', { name: 'Move device' }).click();
    await page.getByText('Moved to Second shop.').waitFor();
    const audit = await appApi<{
      data: { kind: string; details: { effective_at: string; to_site_id: string } }[];
    }>(page, 'GET', '/accounts/me/audit?kind=device.moved');
    expect(audit.data).toHaveLength(1);
    expect(audit.data[0]!.details.to_site_id).toBe(second.id);
    expect(Date.parse(audit.data[0]!.details.effective_at)).toBe(twoHoursAgo.getTime());

    // Not later than the previous move: the API's 422 beside the time.
    await page.getByLabel('New site').selectOption(third.id);
    await page.getByLabel('From (your local time)').fill(local(new Date(twoHoursAgo.getTime() - 3600_000)));
    await page.getByRole('button', { name: 'Move device' }).click();
    await page.locator('#move-when-error').waitFor();
    expect(await page.getByLabel('From (your local time)').getAttribute('aria-describedby')).toContain(
      'move-when-error',
    );
    expect(await axeViolations(page)).toEqual([]);

    // Tomorrow: planned, and the device stays where it is until then.
    const tomorrow = new Date(Math.floor((Date.now() + 86_400_000) / 60_000) * 60_000);
    await page.getByLabel('From (your local time)').fill(local(tomorrow));
    await page.getByRole('button', { name: 'Move device' }).click();
    await page.getByText(/^The move to Third shop is planned for/).waitFor();
    expect(await page.locator('#move-when-error').count()).toBe(0);
    const now = await appApi<{ site_id: string }>(page, 'GET', `/devices/${device.id}`);
    expect(now.site_id).toBe(second.id);
    await check(page, 'device-move-planned');
    await context.close();
  });
});
