import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { axeViolations, launchBrowser, newContext, screenshot, tokenFor } from '../helpers/browser.ts';
import { startTestCloud, type TestCloud } from '../helpers/cloud.ts';
import { DATABASES } from '../helpers/databases.ts';
import { signInInBrowser } from '../helpers/dashboard.ts';
import { eventually } from '../helpers/eventually.ts';
import { createDevice, createSite, type CreatedDevice } from '../helpers/fixtures.ts';

jest.setTimeout(120_000);

const EMAIL = 'chef@example.com';

/** One temperature reading through the device's own ingest endpoint, as a device sends it. */
async function ingest(t: TestCloud, device: CreatedDevice, value: number): Promise<void> {
  const answer = await t.http.post(
    '/v1/ingest',
    { device: device.local_id, ts: new Date().toISOString(), measurements: [{ type: 'temperature', value }] },
    { token: device.ingest_token },
  );
  if (answer.status !== 200) throw new Error(`POST /v1/ingest: ${answer.status} ${answer.text}`);
}

describe.each(DATABASES)('dashboard alert rules (%s)', (db) => {
  let t: TestCloud;
  let browser: Browser;
  let token: string;
  let device: CreatedDevice;
  let sensorId: string;
  let desktop: BrowserContext;
  let page: Page;

  beforeAll(async () => {
    t = await startTestCloud({ db });
    browser = await launchBrowser();
    desktop = await newContext(browser, t.url, 'desktop');
    page = await desktop.newPage();
    await signInInBrowser(t, page, EMAIL);
    token = await tokenFor(t, desktop);
    const site = await createSite(t, token, { name: 'Kitchen' });
    device = await createDevice(t, token, site.id, { name: 'Freezer' });
    await ingest(t, device, -20);
    const sensors = await t.http.get(`/v1/devices/${device.id}/sensors`, { token });
    sensorId = (sensors.json.data as { id: string; kind: string }[]).find(
      (s) => s.kind === 'temperature',
    )!.id;
    // The simple rule stays out of it: only the alert rule judges this sensor.
    const patched = await t.http.patch(`/v1/sensors/${sensorId}`, { rule_enabled: false }, { token });
    expect(patched.status).toBe(200);
  });
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it('creates an alert rule on the sensor page, with the API’s message next to a field', async () => {
    await page.goto(`/app/sensors/${sensorId}`);
    const section = page.locator('section[aria-labelledby="alert-rules-h"]');
    await section.getByText('No alert rule applies to this sensor.').waitFor();
    await section.getByRole('button', { name: 'New alert rule' }).click();
    // No value yet: the API's answer is shown at the value's field.
    await section.getByLabel('Name').fill('Freezer too warm');
    await section.getByLabel('Severity').selectOption('critical');
    await section.getByRole('button', { name: 'Create rule' }).click();
    const valueField = section.locator('.field', { has: page.locator('#cond-0-value') });
    await valueField.locator('.field-error').waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'alert-rules-invalid');

    await section.getByLabel('Value (°C)').fill('-15');
    await section.getByLabel('Hysteresis (°C)').fill('1');
    await section.getByLabel(EMAIL).check();
    await section.getByRole('button', { name: 'Create rule' }).click();
    await section.getByText('Freezer too warm', { exact: true }).waitFor();
    await section.getByText('Above -15 °C (hysteresis 1 °C)').waitFor();
    const rules = await t.http.get('/v1/alert-rules', { token });
    expect(rules.json.data).toHaveLength(1);
    expect(rules.json.data[0]).toMatchObject({
      name: 'Freezer too warm',
      conditions: [{ type: 'above', value: -15, hysteresis: 1, delay_min: 0, severity: 'critical' }],
      notify: { steps: [{ after_min: 0, user_ids: [expect.any(String)] }] },
    });
    expect(rules.json.data[0].channel_ids).toHaveLength(1);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'alert-rules-sensor');
  });

  it('shows the alert-rule alarm with its severity live on the alarms page, and on the sensor', async () => {
    await page.goto('/app/alarms');
    await page.getByText('No open alarms').waitFor();
    const accountId = ((await t.http.get('/v1/accounts/me', { token })).json as { id: string }).id;
    await eventually(() => t.cloud.services.liveStreams.count(accountId) > 0, 'the page to open its stream');

    await ingest(t, device, -12);
    const item = page.locator('[data-event]').first();
    await item.waitFor();
    await item.getByText('Critical').waitFor();
    await item.getByText('Above -15 °C (hysteresis 1 °C)').waitFor();
    await item.getByText('Freezer · Temperature').waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'alert-rules-alarms');

    const phone = await newContext(browser, t.url, 'phone');
    try {
      const small = await phone.newPage();
      await signInInBrowser(t, small, EMAIL, { from: '/app/alarms' });
      await small.locator('[data-event]').first().getByText('Critical').waitFor();
      expect(await axeViolations(small)).toEqual([]);
      await screenshot(small, 'alert-rules-alarms-phone');
      await small.goto(`/app/sensors/${sensorId}`);
      await small.locator('.sensor-now').getByText('Critical').waitFor();
      await small.getByText('Freezer too warm', { exact: true }).waitFor();
      expect(await axeViolations(small)).toEqual([]);
      await screenshot(small, 'alert-rules-sensor-phone');
    } finally {
      await phone.close();
    }

    // the overview shows the severity beside the sensor's state
    await page.goto('/app/');
    await page.locator('.severity-critical').first().waitFor();
    await page.goto('/app/alarms');
    await item.waitFor();

    // the event page names the rule and its condition
    await item.locator('a.event-title').click();
    await page.getByRole('link', { name: 'Freezer too warm' }).waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'alert-rules-event');
  });

  it('edits the rule, then deletes it after a confirmation', async () => {
    await page.goto(`/app/sensors/${sensorId}`);
    const section = page.locator('section[aria-labelledby="alert-rules-h"]');
    await section.getByRole('button', { name: 'Edit the rule “Freezer too warm”' }).click();
    await section.getByLabel('Name').fill('Freezer door');
    await section.getByLabel('When').selectOption('rate_of_change');
    await section.getByLabel('Change of more than (°C)').fill('3');
    await section.getByRole('button', { name: 'Save rule' }).click();
    await section.getByText('Changes by more than 3 °C within 15 min (hysteresis 1 °C)').waitFor();
    const [rule] = (await t.http.get('/v1/alert-rules', { token })).json.data;
    expect(rule).toMatchObject({
      name: 'Freezer door',
      conditions: [
        { type: 'rate_of_change', change: 3, within_min: 15, direction: 'any', severity: 'critical' },
      ],
    });
    expect(await axeViolations(page)).toEqual([]);

    await section.getByRole('button', { name: 'Delete the rule “Freezer door”' }).click();
    await section.getByRole('button', { name: 'Delete', exact: true }).click();
    await section.getByText('No alert rule applies to this sensor.').waitFor();
    expect((await t.http.get('/v1/alert-rules', { token })).json.data).toHaveLength(0);
  });
});
