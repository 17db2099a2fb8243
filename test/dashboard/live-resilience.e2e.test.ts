import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Browser, BrowserContext, Page, Route } from 'playwright-core';
import { launchBrowser, newContext, tokenFor } from '../helpers/browser.ts';
import { startTestCloud, type TestCloud } from '../helpers/cloud.ts';
import { DATABASES } from '../helpers/databases.ts';
import { signInInBrowser } from '../helpers/dashboard.ts';
import { eventually } from '../helpers/eventually.ts';
import { createDevice, createSite, type CreatedDevice } from '../helpers/fixtures.ts';

jest.setTimeout(120_000);

/**
 * What the pages show when the live stream breaks, is refused or comes back, and when a page is
 * left open for a long time: the newest data wins, nothing typed is lost, nothing is missed.
 */

/** One reading through the device's own ingest endpoint, as a device sends it, timed now. */
async function ingest(
  t: TestCloud,
  device: CreatedDevice,
  value: number,
  type = 'temperature',
): Promise<void> {
  const answer = await t.http.post(
    '/v1/ingest',
    { device: device.local_id, ts: new Date().toISOString(), measurements: [{ type, value }] },
    { token: device.ingest_token },
  );
  if (answer.status !== 200) throw new Error(`POST /v1/ingest: ${answer.status} ${answer.text}`);
}

const waitLive = (page: Page) => page.locator('.live-status.live-live').waitFor();
const waitOffline = (page: Page) => page.locator('.live-status.live-offline').waitFor();

/** Answers the matching requests with a 503, counting them, until `unroute`. */
async function refuse(page: Page, pattern: string) {
  let hits = 0;
  const handler = (route: Route) => {
    hits++;
    return route.fulfill({
      status: 503,
      contentType: 'application/json',
      body: JSON.stringify({ error: { code: 'overloaded', message: 'try again' } }),
    });
  };
  await page.route(pattern, handler);
  return { hits: () => hits, unroute: () => page.unroute(pattern, handler) };
}

describe.each(DATABASES)('dashboard live resilience (%s)', (db) => {
  let t: TestCloud;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let token: string;
  let siteId: string;

  /** A device with one temperature sensor (a first reading of `value`); grace 0, band 0..5 °C. */
  async function deviceWithSensor(name: string, value: number) {
    const device = await createDevice(t, token, siteId, { name });
    await ingest(t, device, value);
    const sensors = await t.http.get(`/v1/devices/${device.id}/sensors`, { token });
    const sensorId = (sensors.json.data as { id: string }[])[0]!.id;
    const patched = await t.http.patch(
      `/v1/sensors/${sensorId}`,
      { ok_min: 0, ok_max: 5, grace_min: 0 },
      { token },
    );
    expect(patched.status).toBe(200);
    return { device, sensorId };
  }

  beforeAll(async () => {
    t = await startTestCloud({ db });
    browser = await launchBrowser();
    context = await newContext(browser, t.url);
    page = await context.newPage();
    await signInInBrowser(t, page, 'live@example.com');
    token = await tokenFor(t, context);
    siteId = (await createSite(t, token, { name: 'Canteen' })).id;
  });
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it('shows on the sensor page the reading missed during a break, over the last one that came live', async () => {
    const { device, sensorId } = await deviceWithSensor('Walk-in', 3);
    await page.goto(`/app/sensors/${sensorId}`);
    await waitLive(page);
    const value = page.locator('.sensor-now .big-value');
    await ingest(t, device, 3.5);
    await value.filter({ hasText: '3.5 °C' }).waitFor();
    // The cloud ends every stream; a reading arrives while the browser is away.
    t.cloud.services.liveStreams.closeAll();
    await waitOffline(page);
    await ingest(t, device, 2);
    await waitLive(page);
    await value.filter({ hasText: '2.0 °C' }).waitFor();
  });

  it('loads what changed while the first stream was refused, once the stream opens', async () => {
    const { device, sensorId } = await deviceWithSensor('Reach-in', 3);
    const stream = await refuse(page, '**/app/api/stream');
    await page.goto(`/app/sites/${siteId}`);
    const value = page.locator(`tr[data-sensor="${sensorId}"] td.value`);
    await value.filter({ hasText: '3.0 °C' }).waitFor();
    await waitOffline(page);
    // A reading the page has not loaded and no stream carried.
    await ingest(t, device, 1.5);
    await stream.unroute();
    await waitLive(page);
    await value.filter({ hasText: '1.5 °C' }).waitFor();
  });

  it.each(['/app/', '/app/sites/:site'])(
    'keeps on %s the live values when the reload after a reconnect fails',
    async (path) => {
      const { device, sensorId } = await deviceWithSensor(`Display ${path.length}`, 3);
      await page.goto(path.replace(':site', siteId));
      await waitLive(page);
      const value = page.locator(`tr[data-sensor="${sensorId}"] td.value`);
      await value.filter({ hasText: '3.0 °C' }).waitFor();
      await ingest(t, device, 4.5);
      await value.filter({ hasText: '4.5 °C' }).waitFor();
      // The reload after the reconnect fails: the page keeps the newest values it has.
      const reads = await refuse(page, '**/app/api/devices/*/sensors');
      try {
        t.cloud.services.liveStreams.closeAll();
        await waitOffline(page);
        await waitLive(page);
        await eventually(() => reads.hits() > 0, 'the reload to be refused');
        // Rendered after the refusal: a last animation frame, then the value.
        await page.evaluate('new Promise((resolve) => requestAnimationFrame(resolve))');
        expect(await value.textContent()).toBe('4.5 °C');
      } finally {
        await reads.unroute();
      }
    },
  );

  it('keeps a note being typed on the alarms page through a reconnect, and alarms that open while it reloads', async () => {
    const first = await deviceWithSensor('Chiller', 3);
    const second = await deviceWithSensor('Ice maker', 3);
    await ingest(t, first.device, 9);
    await page.goto('/app/alarms');
    await waitLive(page);
    const item = page.locator(`[data-event]`, { hasText: 'Chiller' }).first();
    await item.getByRole('button', { name: 'Acknowledge…' }).click();
    const note = item.getByLabel('Note');
    await note.fill('Checked the door, half way through');
    const countBefore = await page.locator('[data-event]').count();

    // The list's read after the reconnect is held back until an alarm has opened meanwhile.
    let releaseRead: () => void = () => {};
    const held = new Promise<void>((resolve) => (releaseRead = resolve));
    let heldReads = 0;
    await page.route('**/app/api/events?*', async (route) => {
      heldReads++;
      const response = await route.fetch();
      await held;
      await route.fulfill({ response });
    });
    t.cloud.services.liveStreams.closeAll();
    await waitOffline(page);
    await waitLive(page);
    await eventually(() => heldReads > 0, 'the list to be read again');
    await ingest(t, second.device, 9);
    await page.locator('[data-event]', { hasText: 'Ice maker' }).waitFor();
    releaseRead();
    await page.waitForResponse((r) => r.url().includes('/app/api/events?'));
    await page.unroute('**/app/api/events?*');

    expect(await page.locator('[data-event]').count()).toBe(countBefore + 1);
    expect(await note.inputValue()).toBe('Checked the door, half way through');
    expect(await page.evaluate<string>('document.activeElement?.tagName')).toBe('TEXTAREA');
  });

  it('makes the silence window of an untouched form start when Silence is pressed', async () => {
    const { sensorId } = await deviceWithSensor('Pastry fridge', 3);
    const other = await context.newPage();
    await other.clock.install();
    await other.goto(`/app/sensors/${sensorId}`);
    await other.getByRole('heading', { name: 'Silence windows' }).waitFor();
    // The page stays open for two hours.
    await other.clock.fastForward('02:00:00');
    const pressedAt = await other.evaluate(() => Date.now());
    await other.getByLabel('Reason').fill('Defrosting');
    await other.getByRole('button', { name: 'Silence', exact: true }).click();
    await other.getByRole('cell', { name: 'Defrosting', exact: true }).waitFor();
    const list = await t.http.get(`/v1/sensors/${sensorId}/silences`, { token });
    const window = (list.json.data as { from: string; to: string }[])[0]!;
    expect(Math.abs(Date.parse(window.from) - pressedAt)).toBeLessThan(60_000);
    expect(Date.parse(window.to) - Date.parse(window.from)).toBe(3600_000);
    await other.close();
  });

  it('moves the end of the event page’s chart on with the event’s live changes', async () => {
    const { device, sensorId } = await deviceWithSensor('Soft serve', 3);
    await ingest(t, device, 9);
    const eventId = await eventually(async () => {
      const list = await t.http.get(`/v1/events?sensor_id=${sensorId}`, { token });
      return (list.json.data as { id: string }[])[0]?.id;
    }, 'the alarm');
    const ends: number[] = [];
    const onRequest = (r: { url: () => string }) => {
      const url = new URL(r.url());
      if (url.pathname.endsWith('/measurements')) ends.push(Date.parse(url.searchParams.get('to')!));
    };
    page.on('request', onRequest);
    try {
      await page.goto(`/app/events/${eventId}`);
      await waitLive(page);
      await eventually(() => ends.length > 0, 'the chart to be read');
      // A reading after the page opened: the chart is read again up to it.
      const before = Date.now();
      await ingest(t, device, 9.8);
      await eventually(() => ends.some((end) => end >= before), 'the chart to be read up to now');
    } finally {
      page.off('request', onRequest);
    }
  });

  it('says when signing out failed, stays signed in, and signs out on a second try', async () => {
    const own = await newContext(browser, t.url);
    const other = await own.newPage();
    await signInInBrowser(t, other, 'shared-pc@example.com');
    const logout = await refuse(other, '**/app/api/auth/logout');
    await other.getByRole('banner').getByRole('button', { name: 'Sign out' }).click();
    await other.getByRole('alert').filter({ hasText: 'still signed in' }).waitFor();
    expect(new URL(other.url()).pathname).not.toBe('/app/sign-in');
    expect(logout.hits()).toBe(1);
    await logout.unroute();
    await other.getByRole('button', { name: 'Try signing out again' }).click();
    await other.waitForURL((u) => u.pathname === '/app/sign-in');
    await own.close();
  });

  it('names a leak sensor’s values and alarms in words', async () => {
    const device = await createDevice(t, token, siteId, { name: 'Under sink' });
    await ingest(t, device, 1, 'leak');
    const sensors = await t.http.get(`/v1/devices/${device.id}/sensors`, { token });
    const sensorId = (sensors.json.data as { id: string }[])[0]!.id;
    await page.goto('/app/');
    await page.locator(`tr[data-sensor="${sensorId}"] td.value`, { hasText: /^Leak$/ }).waitFor();
    await page.locator('.open-alarms', { hasText: 'Leak detected' }).waitFor();
    await page.goto(`/app/sensors/${sensorId}`);
    await page.locator('.sensor-now .big-value', { hasText: /^Leak$/ }).waitFor();
    await page.getByLabel('Highest OK value (0 dry, 1 leak)').waitFor();
    await page.goto('/app/alarms');
    await page.locator('[data-event]', { hasText: 'Under sink' }).getByText('Leak detected').waitFor();
    expect(await page.locator('main').textContent()).not.toContain('boolean');
  });
});
