import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, tempDir } from '../../helpers/databases.ts';
import { createDevice, createSite } from '../../helpers/fixtures.ts';
import { at, ingestHttp, READ_ENV, type Reading } from '../measurements/reads-helpers.ts';

const MINUTE = 60_000_000;

/**
 * What an inspector reads: a data set built through the API (readings, an alarm acknowledged with a
 * note, a threshold change, a silence with its reason, a device moved in), the report made by the
 * service, and the PDF read back with poppler's pdftotext and pdfinfo.
 */
describe.each(DATABASES)('report content on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  afterEach(async () => t?.stop());

  async function makeReport(body: Record<string, unknown>): Promise<{ text: string; info: string }> {
    const created = await t.http.post('/v1/reports', body, { token: user.token });
    expect(created.status).toBe(202);
    await t.cloud.services.jobs.drain();
    const report = await t.http.get(`/v1/reports/${created.json.id}`, { token: user.token });
    expect([report.json.state, report.json.error]).toEqual(['ready', null]);
    const response = await fetch(`${t.url}/v1/reports/${created.json.id}/file`, {
      headers: { authorization: `Bearer ${user.token}` },
    });
    const file = path.join(tempDir('sm-report-'), 'report.pdf');
    fs.writeFileSync(file, Buffer.from(await response.arrayBuffer()));
    return {
      text: execFileSync('pdftotext', ['-layout', file, '-']).toString('utf8'),
      info: execFileSync('pdfinfo', ['-isodates', file]).toString('utf8'),
    };
  }

  /** The lines of the text that contain every one of `parts`. */
  const linesWith = (text: string, ...parts: string[]) =>
    text.split('\n').filter((line) => parts.every((p) => line.includes(p)));

  it('prints the readings, the alarm with its note, the threshold change, the silence, the move and a deleted device', async () => {
    const clock = new ManualClock(at('2026-03-10T12:00:00Z'));
    t = await startTestCloud({ db, clock, env: { ...READ_ENV, RATE_LIMIT_REPORT_PER_MIN: '100' } });
    user = await signUp(t, 'haccp@example.com');
    const store = await createSite(t, user.token, { name: 'Cold Store 1', timezone: 'Europe/Berlin' });
    const bar = await createSite(t, user.token, { name: 'Bar', timezone: 'Europe/Berlin' });
    const fridge = await createDevice(t, user.token, store.id, { name: 'Walk-in fridge' });
    const display = await createDevice(t, user.token, bar.id, { name: 'Display fridge' });
    // A fridge taken out of service on 10 March: its readings before are still the store's record.
    const old = await createDevice(t, user.token, store.id, { name: 'Old fridge' });
    await ingestHttp(t, old, [
      { ts: at('2026-03-05T12:00:00Z'), value: 2.2 },
      { ts: at('2026-03-05T12:10:00Z'), value: 4.4 },
    ]);
    expect((await t.http.delete(`/v1/devices/${old.id}`, { token: user.token })).status).toBe(204);

    // 12 readings in range (2.5, 3.5, 4.5), 7 at 9.5 for an hour (an alarm after 30 minutes' grace),
    // then 3.0: 20 readings, min 2.5, mean 5.575, max 9.5.
    const readings: Reading[] = [
      ...Array.from({ length: 12 }, (_, i) => ({
        ts: at('2026-03-10T08:00:00Z') + i * 10 * MINUTE,
        value: [2.5, 3.5, 4.5][i % 3]!,
      })),
      ...Array.from({ length: 7 }, (_, i) => ({
        ts: at('2026-03-10T10:00:00Z') + i * 10 * MINUTE,
        value: 9.5,
      })),
      { ts: at('2026-03-10T11:10:00Z'), value: 3 },
    ];
    await ingestHttp(t, fridge, readings, { concurrency: 1 });
    const sensor = (await t.http.get(`/v1/devices/${fridge.id}/sensors`, { token: user.token })).json.data[0];
    const events = (await t.http.get(`/v1/events?sensor_id=${sensor.id}`, { token: user.token })).json.data;
    const alarm = events.find((e: { kind: string }) => e.kind === 'threshold_high');
    expect(alarm).toBeDefined();
    const ack = await t.http.post(
      `/v1/events/${alarm.id}/ack`,
      { note: 'Door left open by delivery; stock moved to freezer' },
      { token: user.token },
    );
    expect(ack.status).toBe(200);
    expect(
      (await t.http.patch(`/v1/sensors/${sensor.id}`, { ok_max: 6.5 }, { token: user.token })).status,
    ).toBe(200);
    const silence = await t.http.post(
      `/v1/sensors/${sensor.id}/silence`,
      { from: '2026-03-11T00:00:00Z', to: '2026-03-11T06:00:00Z', reason: 'Defrost cycle overnight' },
      { token: user.token },
    );
    expect(silence.status).toBe(201);

    // The display fridge moves from the bar into the store on 15 March: its reading before stays
    // with the bar (1.1), the one after is the store's (1.7).
    clock.set(at('2026-03-17T00:00:00Z'));
    await ingestHttp(t, display, [{ ts: at('2026-03-14T12:00:00Z'), value: 1.1 }]);
    await ingestHttp(t, display, [{ ts: at('2026-03-16T12:00:00Z'), value: 1.7 }]);
    const moved = await t.http.post(
      `/v1/devices/${display.id}/move`,
      { to_site_id: store.id, effective_at: '2026-03-15T00:00:00Z' },
      { token: user.token },
    );
    expect(moved.status).toBe(200);

    clock.set(at('2026-04-02T09:00:00Z'));
    // A fridge installed after March is not in March's report.
    const newer = await createDevice(t, user.token, store.id, { name: 'New fridge' });
    await ingestHttp(t, newer, [{ ts: at('2026-04-02T08:00:00Z'), value: 3 }]);
    const period = { from: '2026-03-01T00:00:00+01:00', to: '2026-04-01T00:00:00+02:00' };
    const { text, info } = await makeReport({
      site_id: store.id,
      template: 'haccp_monthly',
      language: 'en',
      period,
    });

    // The summary row of the walk-in fridge: min / mean / max and its readings.
    const fridgeRows = linesWith(text, 'Walk-in fridge', '2.5', '5.6', '9.5', '20');
    expect(fridgeRows.length).toBeGreaterThan(0);
    // Its daily row for 10 March: the same figures, and 70 minutes out of range.
    expect(linesWith(text, '10 Mar 2026', '2.5', '5.6', '9.5', '20', '70').length).toBe(1);
    // The display fridge after the move only: 1.7, never the bar's 1.1.
    expect(linesWith(text, 'Display fridge', '1.7').length).toBeGreaterThan(0);
    expect(linesWith(text, 'Display fridge', '1.1')).toEqual([]);
    expect(text).toContain('Device moves');
    expect(text).not.toContain('New fridge');
    // The deleted fridge: its readings (min 2.2, mean 3.3, max 4.4) and the deletion.
    expect(linesWith(text, 'Old fridge', '2.2', '3.3', '4.4').length).toBeGreaterThan(0);
    expect(linesWith(text, 'Old fridge', '10 Mar 2026').length).toBeGreaterThan(0);
    expect(linesWith(text, 'Display fridge', 'Bar', 'Cold Store 1').length).toBe(1);
    // The alarm, its peak and its acknowledgement note, by whom.
    expect(linesWith(text, 'Walk-in fridge', 'above', '9.5 °C', 'haccp@example.com').length).toBe(1);
    expect(text).toContain('Door left open by delivery; stock moved to freezer');
    expect(text).toContain('haccp@example.com');
    // The threshold change, before and after.
    expect(text).toContain('Threshold changes');
    expect(linesWith(text, 'Max 5.0 °C', 'Max 6.5 °C', 'haccp@example.com').length).toBe(1);
    // The silence window's reason.
    expect(text).toContain('Defrost cycle overnight');
    // Both UTC offsets of the period (Europe/Berlin changes on 29 March).
    expect(text).toContain('UTC+01:00');
    expect(text).toContain('UTC+02:00');
    expect(info).toMatch(/^Pages:\s+\d+$/m);
    expect(info).toMatch(/^Title:\s+.*Cold Store 1/m);
    expect(info).toMatch(/^CreationDate:\s+2026-04-02T(09:00:00Z|11:00:00\+02)/m);

    const german = await makeReport({ site_id: store.id, template: 'haccp_monthly', language: 'de', period });
    expect(german.text).toContain('Übersicht');
    expect(german.text).toContain('Alarme');
    expect(german.text).toContain('Grenzwertänderungen');
    expect(german.text).toContain('Door left open by delivery; stock moved to freezer');
  });

  it('puts each reading on its local day in America/New_York across the March change and prints both offsets', async () => {
    const clock = new ManualClock(at('2026-03-20T12:00:00Z'));
    t = await startTestCloud({ db, clock, env: READ_ENV });
    user = await signUp(t, 'nyc@example.com');
    const site = await createSite(t, user.token, { name: 'Deli', timezone: 'America/New_York' });
    const device = await createDevice(t, user.token, site.id, { name: 'Deli case' });
    // 23:30 local on 7 March (EST, UTC−5) and on 8 March (EDT, UTC−4): each is its own local day.
    await ingestHttp(t, device, [
      { ts: at('2026-03-08T04:30:00Z'), value: 1.25 },
      { ts: at('2026-03-09T03:30:00Z'), value: 3.75 },
    ]);
    const { text } = await makeReport({
      site_id: site.id,
      template: 'haccp_monthly',
      language: 'en',
      period: { from: '2026-03-01T00:00:00-05:00', to: '2026-03-15T00:00:00-04:00' },
    });
    expect(text).toContain('UTC−05:00');
    expect(text).toContain('UTC−04:00');
    // Daily rows: 7 March has 1.25 (printed 1.3), 8 March (23 hours long) has 3.75 (3.8).
    expect(linesWith(text, '7 Mar 2026', '24', '1.3', '1').length).toBe(1);
    expect(linesWith(text, '8 Mar 2026', '23', '3.8', '1').length).toBe(1);
    expect(linesWith(text, '7 Mar 2026', '3.8')).toEqual([]);
    expect(linesWith(text, '9 Mar 2026', '3.8')).toEqual([]);
  });

  it("lists an alert rule's alarm with its rule, severity and acknowledgement note, in each language", async () => {
    const clock = new ManualClock(at('2026-03-01T06:00:00Z'));
    t = await startTestCloud({ db, clock, env: { ...READ_ENV, RATE_LIMIT_REPORT_PER_MIN: '100' } });
    user = await signUp(t, 'rules@example.com');
    const site = await createSite(t, user.token, { name: 'Kitchen', timezone: 'Europe/Paris' });
    const device = await createDevice(t, user.token, site.id, { name: 'Prep fridge' });
    const channelId = await ingestHttp(t, device, [{ ts: at('2026-03-01T05:00:00Z'), value: 3 }]);
    // The sensor's own rule is switched off: the only alarm is the alert rule's.
    const sensor = (await t.http.get(`/v1/devices/${device.id}/sensors`, { token: user.token })).json.data[0];
    expect(
      (await t.http.patch(`/v1/sensors/${sensor.id}`, { rule_enabled: false }, { token: user.token })).status,
    ).toBe(200);
    const rule = await t.http.post(
      '/v1/alert-rules',
      {
        name: 'Prep fridge above 8',
        channel_ids: [channelId],
        conditions: [{ type: 'above', value: 8, delay_min: 0, severity: 'critical' }],
      },
      { token: user.token },
    );
    expect(rule.status).toBe(201);
    clock.set(at('2026-03-10T12:00:00Z'));
    await ingestHttp(
      t,
      device,
      [
        { ts: at('2026-03-10T09:00:00Z'), value: 8.5 },
        { ts: at('2026-03-10T09:10:00Z'), value: 10.25 },
        { ts: at('2026-03-10T09:20:00Z'), value: 4 },
      ],
      { concurrency: 1 },
    );
    await t.cloud.services.rules.drain();
    await t.cloud.services.alertEngine.drain();
    const events = (await t.http.get(`/v1/events?channel_id=${channelId}`, { token: user.token })).json.data;
    expect(events).toHaveLength(1);
    const ack = await t.http.post(
      `/v1/events/${events[0].id}/ack`,
      { note: 'Compressor restarted' },
      { token: user.token },
    );
    expect(ack.status).toBe(200);

    clock.set(at('2026-04-02T09:00:00Z'));
    const period = { from: '2026-03-01T00:00:00+01:00', to: '2026-04-01T00:00:00+02:00' };
    const english = await makeReport({ site_id: site.id, template: 'haccp_monthly', language: 'en', period });
    // The alarm's row (peak 10.3 °C, acknowledged by whom) and the line under it.
    expect(linesWith(english.text, 'Prep fridge', 'above', '10.3 °C', 'rules@example.com').length).toBe(1);
    expect(english.text).toContain('Alert rule: Prep fridge above 8 (critical) · Note: Compressor restarted');
    const german = await makeReport({ site_id: site.id, template: 'haccp_monthly', language: 'de', period });
    expect(german.text).toContain('Alarmregel: Prep fridge above 8 (kritisch)');
    const french = await makeReport({ site_id: site.id, template: 'haccp_monthly', language: 'fr', period });
    expect(french.text).toContain('Règle d’alerte: Prep fridge above 8 (critique)');
  });
});
