import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Browser, Page } from 'playwright-core';
import { axeViolations, launchBrowser, newContext, screenshot } from '../../helpers/browser.ts';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createSite } from '../../helpers/fixtures.ts';
import { deviceWith, HOUR, ingest, MINUTE, publish, PUBLIC_ENV, sensorsOf } from './public-helpers.ts';

/**
 * The public map (`/map`) in Debian's Chromium: pins appear for the public sensors only, a click on
 * a pin opens its detail and a chart of its readings, the ranges switch, the leaderboard and the
 * stats show, pins stay tappable on a phone, nothing is loaded from another site (no tile server),
 * and the page has no serious accessibility violation. Screenshots go to
 * test-output/screenshots/.
 */
describe('the public map in Chromium', () => {
  let t: TestCloud;
  let browser: Browser;
  let page: Page;
  let roofTemperature: string;
  const errors: string[] = [];
  const external: string[] = [];

  beforeAll(async () => {
    t = await startTestCloud({ env: PUBLIC_ENV });
    const owner = await signUp(t, 'owner@example.com');
    const site = await createSite(t, owner.token);
    const now = Date.now() * 1000;
    const roof = await deviceWith(t, owner.token, site.id, now - 20 * HOUR, [
      { type: 'temperature', value: 12 },
      { type: 'humidity', value: 70 },
    ]);
    // A day of readings every 20 minutes: a curve for the chart.
    for (let ts = now - 20 * HOUR + 20 * MINUTE; ts < now; ts += 20 * MINUTE) {
      const hour = (ts / HOUR) % 24;
      await ingest(t, roof, ts, [
        { type: 'temperature', value: Math.round((14 + 6 * Math.sin((hour / 24) * 2 * Math.PI)) * 10) / 10 },
        { type: 'humidity', value: Math.round(60 + 15 * Math.cos((hour / 24) * 2 * Math.PI)) },
      ]);
    }
    await publish(t, owner.token, roof.id, {
      nickname: 'Kreuzberg roof',
      location_name: 'Berlin',
      lat: 52.5,
      lon: 13.4,
      organisation: 'Hackerspace',
    });
    roofTemperature = (await sensorsOf(t, owner.token, roof.id)).find((s) => s.kind === 'temperature')!.id;
    for (const [nickname, location_name, lat, lon, type, value] of [
      ['Harbour', 'Lisbon', 38.7, -9.1, 'temperature', 25],
      ['Lab', 'Boston', 42.36, -71.06, 'co2', 950],
      ['Summit', 'Quito', -0.18, -78.47, 'pressure', 730],
    ] as const) {
      const device = await deviceWith(t, owner.token, site.id, now - MINUTE, [{ type, value }]);
      await publish(t, owner.token, device.id, { nickname, location_name, lat, lon });
    }
    // A private device: never a pin.
    await deviceWith(t, owner.token, site.id, now - MINUTE, [{ type: 'temperature', value: 30 }]);

    browser = await launchBrowser();
    const context = await newContext(browser, t.url);
    page = await context.newPage();
    // A step that cannot happen fails with playwright's own message, well before jest's timeout.
    page.setDefaultTimeout(10_000);
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    page.on('pageerror', (e) => errors.push(e.message));
    // The page works with no internet: nothing it loads comes from anywhere but the cloud.
    context.on('request', (r) => {
      if (!r.url().startsWith(t.url)) external.push(r.url());
    });
  });
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it('shows a pin per public sensor, the stats and the leaderboard', async () => {
    await page.goto('/map');
    await page.locator('[data-pin-id]').nth(4).waitFor();
    expect(await page.locator('[data-pin-id]').count()).toBe(5);
    await expect(page.locator('.stats').textContent()).resolves.toContain('5 sensors');
    await page.locator('.board .row').first().waitFor();
    expect(await page.locator('.board .row .who').allTextContents()).toEqual([
      expect.stringContaining('Harbour'),
      expect.stringContaining('Kreuzberg roof'),
    ]);
    // The kind filter keeps one kind.
    await page.getByRole('button', { name: 'CO₂', exact: true }).click();
    // Polled from the test: the page's CSP (script-src 'self') refuses waitForFunction's string predicate.
    await eventually(async () => (await page.locator('[data-pin-id]').count()) === 1, 'one CO₂ pin');
    await page.getByRole('button', { name: 'All', exact: true }).click();
    await eventually(async () => (await page.locator('[data-pin-id]').count()) === 5, 'all five pins');
    await screenshot(page, 'map-world');
  });

  it('opens a sensor on a click: its detail and a chart of its readings, for each range', async () => {
    await page.locator(`[data-pin-id="${roofTemperature}"] .dot`).click();
    const panel = page.locator('.sensor-panel');
    await panel.locator('h2', { hasText: 'Kreuzberg roof' }).waitFor();
    await panel.locator('.chart canvas').waitFor();
    const text = await panel.textContent();
    expect(text).toContain('Berlin');
    expect(text).toContain('Hackerspace');
    expect(text).toContain('Temperature');
    await screenshot(page, 'map-sensor');
    for (const range of ['7 days', '30 days', '24 hours']) {
      await panel.getByRole('button', { name: range }).click();
      await panel.locator('.chart canvas').waitFor();
    }
    // A range change draws the chart anew: its canvas is briefly absent while the readings load.
    await eventually(async () => (await panel.locator('.chart canvas').count()) > 0, 'the last chart');
  });

  it('sends a report from the sensor panel', async () => {
    const panel = page.locator('.sensor-panel');
    await panel.getByRole('button', { name: 'Report a problem with this sensor' }).click();
    await panel.getByLabel('What is wrong?').fill('The sensor hangs in the sun at noon');
    await panel.getByRole('button', { name: 'Send report' }).click();
    await panel.getByText('Thank you').waitFor();
    const flags = await t.cloud.services.publicApi.flags({ all: false });
    expect(flags.map((f) => [f.sensor_id, f.reason])).toEqual([
      [roofTemperature, 'The sensor hangs in the sun at noon'],
    ]);
  });

  it('on a phone, draws pins large enough to tap, and a tap brings the sensor into view', async () => {
    const phone = await newContext(browser, t.url, 'phone');
    phone.on('request', (r) => {
      if (!r.url().startsWith(t.url)) external.push(r.url());
    });
    try {
      const small = await phone.newPage();
      small.setDefaultTimeout(10_000);
      small.on('pageerror', (e) => errors.push(e.message));
      await small.goto('/map');
      const pin = small.locator(`[data-pin-id="${roofTemperature}"]`);
      await pin.waitFor();
      const dot = (await pin.locator('.dot').boundingBox())!;
      const hit = (await pin.locator('.hit').boundingBox())!;
      // Screen pixels, whatever the map's width: a visible dot and a tap area of 20 px.
      expect(dot.width).toBeGreaterThanOrEqual(9);
      expect(hit.width).toBeGreaterThanOrEqual(19);
      await pin.locator('.dot').click();
      const panel = small.locator('.sensor-panel');
      await panel.locator('h2', { hasText: 'Kreuzberg roof' }).waitFor();
      await panel.locator('.chart canvas').waitFor();
      await eventually(async () => {
        const box = await panel.locator('h2').boundingBox();
        return box !== null && box.y >= 0 && box.y + box.height <= 844;
      }, 'the sensor panel scrolled into view');
      await screenshot(small, 'map-phone-sensor');
    } finally {
      await phone.close();
    }
  });

  it('has no serious accessibility violation, logs no error and loads nothing from elsewhere', async () => {
    expect(await axeViolations(page)).toEqual([]);
    expect(errors).toEqual([]);
    expect(external).toEqual([]);
  });
});
