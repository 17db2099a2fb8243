import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { axeViolations, launchBrowser, newContext, screenshot, tokenFor } from '../helpers/browser.ts';
import { startTestCloud, type TestCloud } from '../helpers/cloud.ts';
import { DATABASES } from '../helpers/databases.ts';
import { signInInBrowser } from '../helpers/dashboard.ts';
import { eventually } from '../helpers/eventually.ts';
import { createDevice, createSite, type CreatedDevice } from '../helpers/fixtures.ts';

jest.setTimeout(120_000);

const EMAIL = 'manager@example.com';

/** One temperature reading through the device's own ingest endpoint, as a device sends it. */
async function ingest(t: TestCloud, device: CreatedDevice, ts: Date, value: number): Promise<void> {
  const answer = await t.http.post(
    '/v1/ingest',
    { device: device.local_id, ts: ts.toISOString(), measurements: [{ type: 'temperature', value }] },
    { token: device.ingest_token },
  );
  if (answer.status !== 200) throw new Error(`POST /v1/ingest: ${answer.status} ${answer.text}`);
}

/** The colour of the chart's canvas at a point (canvas pixels). */
async function pixelAt(page: Page, x: number, y: number): Promise<number[]> {
  // A string: the tests' TypeScript has no DOM types; the page runs it as it is.
  return page.evaluate<number[]>(
    `Array.from(document.querySelector('.chart-canvas canvas').getContext('2d').getImageData(${x}, ${y}, 1, 1).data)`,
  );
}

describe.each(DATABASES)('dashboard sensors and alarms (%s)', (db) => {
  let t: TestCloud;
  let browser: Browser;
  let token: string;
  let device: CreatedDevice;
  let sensorId: string;
  let eventId: string;
  let desktop: BrowserContext;
  let page: Page;
  const readings: number[] = [];

  beforeAll(async () => {
    t = await startTestCloud({ db });
    browser = await launchBrowser();
    desktop = await newContext(browser, t.url, 'desktop');
    page = await desktop.newPage();
    await signInInBrowser(t, page, EMAIL);
    token = await tokenFor(t, desktop);
    const site = await createSite(t, token, { name: 'Bakery' });
    // A second site without alarms, for the alarm list's site filter.
    await createSite(t, token, { name: 'Dairy' });
    device = await createDevice(t, token, site.id, { name: 'Cold room' });
    // Six hours of readings inside the band, one every 30 minutes.
    const now = Date.now();
    for (let i = 12; i >= 1; i--) {
      const value = 3 + Math.sin(i / 2);
      await ingest(t, device, new Date(now - i * 30 * 60_000), value);
      readings.push(value);
    }
    const sensors = await t.http.get(`/v1/devices/${device.id}/sensors`, { token });
    sensorId = (sensors.json.data as { id: string; kind: string }[]).find(
      (s) => s.kind === 'temperature',
    )!.id;
    // Grace 0: the next reading above the band is an alarm at once (real time, no clock to move).
    const patched = await t.http.patch(
      `/v1/sensors/${sensorId}`,
      { ok_min: 0, ok_max: 5, grace_min: 0 },
      { token },
    );
    expect(patched.status).toBe(200);
  });
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it('shows a new alarm on the alarms page without a reload, and acknowledges it with a note', async () => {
    await page.goto('/app/alarms');
    await page.getByRole('heading', { name: 'Alarms', level: 1 }).waitFor();
    await page.getByText('No open alarms').waitFor();
    const accountId = ((await t.http.get('/v1/accounts/me', { token })).json as { id: string }).id;
    await eventually(() => t.cloud.services.liveStreams.count(accountId) > 0, 'the page to open its stream');

    await ingest(t, device, new Date(), 9.5);
    readings.push(9.5);
    const item = page.locator('[data-event]').first();
    await item.waitFor();
    eventId = (await item.getAttribute('data-event'))!;
    // The sensor's name and unit follow from their own reads.
    await item.getByText('Above 5 °C').waitFor();
    await item.getByText('Cold room · Temperature').waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'alarms');

    // Opened, then cancelled: nothing acknowledged, the focus back on the button.
    await item.getByRole('button', { name: 'Acknowledge…' }).click();
    await item.getByRole('button', { name: 'Cancel' }).click();
    await item.getByLabel('Note').waitFor({ state: 'detached' });
    await eventually(
      async () => (await page.evaluate<string>('document.activeElement.textContent')) === 'Acknowledge…',
      'focus back on the button',
    );
    expect((await t.http.get(`/v1/events/${eventId}`, { token })).json.acknowledged_at).toBeNull();

    await item.getByRole('button', { name: 'Acknowledge…' }).click();
    // The keyboard's focus moves into the note.
    await eventually(
      async () => (await page.evaluate<string>('document.activeElement.tagName')) === 'TEXTAREA',
      'focus',
    );
    await item.getByLabel('Note').fill('Door left open after delivery; closed it, product checked');
    await item.getByRole('button', { name: 'Acknowledge', exact: true }).click();
    await item.getByText('Acknowledged by manager@example.com').waitFor();
    const event = await t.http.get(`/v1/events/${eventId}`, { token });
    expect(event.json.acknowledged_at).not.toBeNull();
    expect(event.json.ack_note).toBe('Door left open after delivery; closed it, product checked');
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'alarms-acknowledged');
  });

  it('keeps the filters in the URL, so a filtered list is a link', async () => {
    await page.getByLabel('State').selectOption('all');
    await page.waitForURL((u) => u.searchParams.get('state') === 'all');
    await page.getByLabel('Kind').selectOption('no_data');
    await page.waitForURL((u) => u.searchParams.get('kind') === 'no_data');
    await page.getByText('No alarms match').waitFor();
    await page.goto('/app/alarms?state=all&kind=threshold_high');
    await page.locator(`[data-event="${eventId}"]`).waitFor();
    await expect(page.getByLabel('Kind').inputValue()).resolves.toBe('threshold_high');
    // By site: the other site has none, this one has the alarm.
    await page.getByLabel('Site').selectOption({ label: 'Dairy' });
    await page.waitForURL((u) => u.searchParams.get('site_id') !== null);
    await page.getByText('No alarms match').waitFor();
    await page.getByLabel('Site').selectOption({ label: 'Bakery' });
    await page.locator(`[data-event="${eventId}"]`).waitFor();
    const siteId = new URL(page.url()).searchParams.get('site_id');
    expect(siteId).toBe((await t.http.get(`/v1/events/${eventId}`, { token })).json.site_id);
  });

  it('shows the event page with its history and acknowledgement', async () => {
    await page.locator(`[data-event="${eventId}"] a.event-title`).click();
    await page.waitForURL((u) => u.pathname === `/app/events/${eventId}`);
    const history = page.getByRole('list').filter({ hasText: 'Alarm raised' });
    await history.waitFor();
    await expect(history.textContent()).resolves.toContain('Acknowledged by manager@example.com');
    await page.locator('.chart-canvas canvas').waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'event');
  });

  it('draws the sensor chart with the band and the alarm; a threshold with ok_min > ok_max shows the 422 next to the field', async () => {
    await page.goto(`/app/sensors/${sensorId}`);
    await page.getByRole('heading', { name: 'Cold room · Temperature' }).waitFor();
    const chart = page.locator('.chart-canvas');
    await chart.locator('canvas').waitFor();
    await eventually(async () => (await chart.getAttribute('data-band-y')) !== null, 'the band to be drawn');
    const x = Number(await chart.getAttribute('data-band-x'));
    const y = Number(await chart.getAttribute('data-band-y'));
    const [r, g, b, a] = await pixelAt(page, x, y);
    // The band's translucent green: green dominates, and something was painted there.
    expect(a).toBeGreaterThan(0);
    expect(g).toBeGreaterThan(r!);
    expect(g).toBeGreaterThan(b!);
    expect(Number(await chart.getAttribute('data-alarms'))).toBe(1);
    await page.getByText('Alarms in this range (1)').click();
    await expect(page.locator(`.sensor-alarms a[href="/app/events/${eventId}"]`).count()).resolves.toBe(1);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'sensor');

    await page.getByLabel('Lowest OK value (°C)').fill('10');
    await page.getByLabel('Highest OK value (°C)').fill('2');
    await page.getByRole('button', { name: 'Save thresholds' }).click();
    const message = page.locator('#rule-ok_min-error');
    await message.waitFor();
    await expect(message.textContent()).resolves.toBe('ok_min (10) is greater than ok_max (2)');
    await expect(page.getByLabel('Lowest OK value (°C)').getAttribute('aria-describedby')).resolves.toContain(
      'rule-ok_min-error',
    );
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'sensor-invalid-range');
    const unchanged = await t.http.get(`/v1/sensors/${sensorId}`, { token });
    expect(unchanged.json.ok_min).toBe(0);

    await page.getByLabel('Lowest OK value (°C)').fill('1');
    await page.getByLabel('Highest OK value (°C)').fill('6');
    await page.getByRole('button', { name: 'Save thresholds' }).click();
    await page.getByText('Saved.').waitFor();
    expect(await message.count()).toBe(0);
    const saved = await t.http.get(`/v1/sensors/${sensorId}`, { token });
    expect([saved.json.ok_min, saved.json.ok_max]).toEqual([1, 6]);

    // Grace longer than the API allows: its 422 beside the grace field, the rest unchanged.
    await page.getByLabel('Grace (minutes)').fill('400');
    await page.getByRole('button', { name: 'Save thresholds' }).click();
    const graceMessage = page.locator('#rule-grace_min-error');
    await graceMessage.waitFor();
    await expect(page.getByLabel('Grace (minutes)').getAttribute('aria-describedby')).resolves.toContain(
      'rule-grace_min-error',
    );
    expect((await t.http.get(`/v1/sensors/${sensorId}`, { token })).json.grace_min).toBe(0);
    await page.getByLabel('Grace (minutes)').fill('0');
    await page.getByRole('button', { name: 'Save thresholds' }).click();
    await graceMessage.waitFor({ state: 'detached' });

    // A change made elsewhere meanwhile is not undone by a save here, and a decimal comma is a point.
    expect((await t.http.patch(`/v1/sensors/${sensorId}`, { no_data_min: 45 }, { token })).status).toBe(200);
    await page.getByLabel('Highest OK value (°C)').fill('5,5');
    await page.getByRole('button', { name: 'Save thresholds' }).click();
    await eventually(
      async () => (await t.http.get(`/v1/sensors/${sensorId}`, { token })).json.ok_max === 5.5,
      'ok_max saved as 5.5',
    );
    const both = await t.http.get(`/v1/sensors/${sensorId}`, { token });
    expect([both.json.ok_min, both.json.ok_max, both.json.no_data_min]).toEqual([1, 5.5, 45]);

    // A reading arrives: the value and state follow without a reload.
    await ingest(t, device, new Date(), 4.2);
    readings.push(4.2);
    await page.locator('.big-value', { hasText: '4.2 °C' }).waitFor();
    await page.locator('.sensor-now .state-ok').waitFor();

    // Another range: 7 days in 15-minute means.
    await page.getByRole('button', { name: '7 days' }).click();
    await page.getByText(/^\d+ 15-minute means/).waitFor();
    await page.getByRole('button', { name: '30 days' }).click();
    await page.getByText(/^\d+ hourly means/).waitFor();
    // A custom range the API refuses (to before from): its message beside the field.
    await page.getByRole('button', { name: 'Custom' }).click();
    await page.getByLabel('From', { exact: true }).first().fill('2026-01-05T12:00');
    await page.getByLabel('To', { exact: true }).first().fill('2026-01-05T10:00');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await expect(page.locator('#range-to-error').textContent()).resolves.toBe('not later than from');
    // The caption does not go on naming the 30 days' means under the refused range.
    await page.getByText('Nothing shown: this range could not be read').waitFor();
    await page.getByLabel('To', { exact: true }).first().fill('2026-01-05T14:00');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await page.getByText('No measurements in this range').waitFor();
    await page.locator('#range-to-error').waitFor({ state: 'detached' });
    await page.getByRole('button', { name: '24 h', exact: true }).click();
    await page.getByText(/^\d+ 5-minute means/).waitFor();
  });

  it('downloads the range as CSV in the API format', async () => {
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Download CSV of this range' }).click(),
    ]);
    expect(download.suggestedFilename()).toMatch(/^chn_.*\.csv$/);
    const text = fs.readFileSync(await download.path(), 'utf8');
    const lines = text.trim().split('\n');
    expect(lines[0]).toBe('ts,value');
    expect(lines.slice(1).map((l) => Number(l.split(',')[1]))).toEqual(readings);
  });

  it('creates and ends a silence window, and recomputes', async () => {
    await page.getByLabel('Reason').fill('Defrosting');
    await page.getByRole('button', { name: 'Silence', exact: true }).click();
    const row = page.getByRole('row').filter({ hasText: 'Defrosting' });
    await row.waitFor();
    const silences = await t.http.get(`/v1/sensors/${sensorId}/silences`, { token });
    expect(silences.json.data).toHaveLength(1);
    // While the window is on, the sensor is silenced, by label and shape.
    await page.locator('.sensor-now .state-silent', { hasText: '■ Silenced' }).waitFor();
    await row.getByRole('button', { name: /End now/ }).click();
    await row.getByText('(ended early)').waitFor();
    await page.locator('.sensor-now .state-ok').waitFor();
    const ended = await t.http.get(`/v1/sensors/${sensorId}/silences`, { token });
    expect(ended.json.data[0].ended_at).not.toBeNull();

    await page.getByRole('button', { name: 'Recompute the last 24 hours' }).click();
    await page.getByText(/measurements judged/).waitFor();
    expect(await axeViolations(page)).toEqual([]);
  });

  it('shows every page at phone width', async () => {
    const phone = await newContext(browser, t.url, 'phone');
    const small = await phone.newPage();
    await signInInBrowser(t, small, EMAIL, { from: `/app/sensors/${sensorId}` });
    await small.locator('.chart-canvas canvas').waitFor();
    await eventually(
      async () => (await small.locator('.chart-canvas').getAttribute('data-band-y')) !== null,
      'band',
    );
    expect(await axeViolations(small)).toEqual([]);
    await screenshot(small, 'sensor');
    await small.goto('/app/alarms?state=all');
    await small.locator(`[data-event="${eventId}"]`).waitFor();
    expect(await axeViolations(small)).toEqual([]);
    await screenshot(small, 'alarms');
    await small.goto(`/app/events/${eventId}`);
    await small.locator('.chart-canvas canvas').waitFor();
    expect(await axeViolations(small)).toEqual([]);
    await screenshot(small, 'event');
    // Nothing wider than the screen: the page never scrolls sideways.
    const overflow = await small.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
    expect(overflow).toBeLessThanOrEqual(0);
    await phone.close();
  });
});
