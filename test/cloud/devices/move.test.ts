import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { parse } from 'csv-parse/sync';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { formatMicros, formatSeconds } from '../../../shared/time.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, tempDir } from '../../helpers/databases.ts';
import { auditOf, createDevice, createSite, type CreatedDevice } from '../../helpers/fixtures.ts';
import { at, ingestHttp, READ_ENV } from '../measurements/reads-helpers.ts';

const NOW = at('2026-03-10T12:00:00Z');
const MINUTE = 60_000_000;
const DAY = 1440 * MINUTE;

/** measurements.csv of the account export, opened with the real unzip. */
async function exportedMeasurements(t: TestCloud, token: string): Promise<Record<string, string>[]> {
  const response = await fetch(`${t.url}/v1/accounts/me/export`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
  });
  expect(response.status).toBe(200);
  const dir = tempDir('sm-move-');
  const zip = path.join(dir, 'export.zip');
  fs.writeFileSync(zip, Buffer.from(await response.arrayBuffer()));
  execFileSync('unzip', ['-q', zip, 'measurements.csv', '-d', dir]);
  const rows = parse<Record<string, string>>(fs.readFileSync(path.join(dir, 'measurements.csv')), {
    columns: true,
  });
  fs.rmSync(dir, { recursive: true, force: true });
  return rows;
}

describe.each(DATABASES)('device move and delete on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let clock: ManualClock;
  let kitchen: string;
  let cellar: string;
  let device: CreatedDevice;
  afterEach(async () => t?.stop());

  async function start(env: Record<string, string> = {}): Promise<void> {
    clock = new ManualClock(NOW);
    t = await startTestCloud({ db, clock, env: { ...READ_ENV, ...env } });
    user = await signUp(t, 'mover@example.com');
    kitchen = (await createSite(t, user.token, { name: 'Kitchen' })).id;
    cellar = (await createSite(t, user.token, { name: 'Cellar' })).id;
    device = await createDevice(t, user.token, kitchen, { local_id: 'fridge-1' });
  }

  const move = (body: unknown, id = device.id) =>
    t.http.post(`/v1/devices/${id}/move`, body, { token: user.token });
  const getDevice = (id = device.id) => t.http.get(`/v1/devices/${id}`, { token: user.token });

  it('moves at a past effective_at: readings before stay with the old site, from effective_at on with the new', async () => {
    await start();
    const effective = NOW - 60 * MINUTE;
    const chn = await ingestHttp(t, device, [
      { ts: effective - 2 * MINUTE, value: 1 },
      { ts: effective - 1, value: 2 },
    ]);
    const answer = await move({ to_site_id: cellar, effective_at: formatMicros(effective) });
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({ id: device.id, site_id: cellar, local_id: 'fridge-1' });
    expect((await getDevice()).json.site_id).toBe(cellar);
    // Late data from before the move arrives after it, and new data after it.
    await ingestHttp(t, device, [
      { ts: effective, value: 3 },
      { ts: effective - 30 * MINUTE, value: 4 },
      { ts: NOW - MINUTE, value: 5 },
    ]);
    const rows = await exportedMeasurements(t, user.token);
    const siteOf = Object.fromEntries(rows.map((r) => [r.value, r.site_id]));
    expect(siteOf).toEqual({ '1': kitchen, '2': kitchen, '4': kitchen, '3': cellar, '5': cellar });
    expect(new Set(rows.map((r) => r.channel_id))).toEqual(new Set([chn]));
    const [audit] = await auditOf(t, user.token, 'device.moved');
    expect(audit).toMatchObject({
      target: device.id,
      by: user.userId,
      details: {
        from_site_id: kitchen,
        to_site_id: cellar,
        effective_at: formatMicros(effective).slice(0, 19) + 'Z',
      },
    });
    const listed = await t.http.get(`/v1/devices?site_id=${cellar}`, { token: user.token });
    expect(listed.json.data.map((d: { id: string }) => d.id)).toEqual([device.id]);
  });

  it('moves at a future effective_at: site_id shows the old site until then, the new one after', async () => {
    await start();
    const effective = NOW + 2 * 60 * MINUTE;
    const answer = await move({ to_site_id: cellar, effective_at: formatMicros(effective) });
    expect(answer.status).toBe(200);
    expect(answer.json.site_id).toBe(kitchen);
    await ingestHttp(t, device, [
      { ts: effective - MINUTE, value: 1 },
      { ts: effective + MINUTE, value: 2 },
    ]);
    await t.cloud.services.jobs.drain();
    expect((await getDevice()).json.site_id).toBe(kitchen);
    clock.set(effective);
    await t.cloud.services.jobs.drain();
    expect((await getDevice()).json.site_id).toBe(cellar);
    const rows = await exportedMeasurements(t, user.token);
    expect(rows.map((r) => [r.value, r.site_id])).toEqual([
      ['1', kitchen],
      ['2', cellar],
    ]);
  });

  it('refuses to delete a site a device is scheduled to move to, so no device lands in a deleted site', async () => {
    await start();
    const effective = NOW + 2 * 60 * MINUTE;
    expect((await move({ to_site_id: cellar, effective_at: formatMicros(effective) })).status).toBe(200);
    const refused = await t.http.delete(`/v1/sites/${cellar}`, { token: user.token });
    expect([refused.status, refused.json.error.code]).toEqual([409, 'site_not_empty']);
    expect(refused.json.error.message).toBe(
      `a device is scheduled to move to this site (at ${formatSeconds(effective)}); delete the site once it has moved and left again`,
    );
    expect((await t.http.get(`/v1/sites/${cellar}`, { token: user.token })).status).toBe(200);
    clock.set(effective);
    await t.cloud.services.jobs.drain();
    expect((await getDevice()).json).toMatchObject({ site_id: cellar });
    // The kitchen, empty once the device has left, can go; a deleted device arrives nowhere.
    expect((await t.http.delete(`/v1/sites/${kitchen}`, { token: user.token })).status).toBe(204);
    const spare = (await createSite(t, user.token, { name: 'Spare' })).id;
    expect((await move({ to_site_id: spare, effective_at: formatMicros(effective + DAY) })).status).toBe(200);
    expect((await t.http.delete(`/v1/devices/${device.id}`, { token: user.token })).status).toBe(204);
    expect((await t.http.delete(`/v1/sites/${spare}`, { token: user.token })).status).toBe(204);
  });

  it('answers 404, 400, 409 and 422 for moves that cannot be made', async () => {
    await start();
    const other = await signUp(t, 'other@example.com');
    const foreignSite = (await createSite(t, other.token)).id;
    const when = formatMicros(NOW - MINUTE);
    expect((await move({ to_site_id: cellar, effective_at: when }, 'dev_nope')).json.error.code).toBe(
      'device_not_found',
    );
    const foreign = await move({ to_site_id: foreignSite, effective_at: 'not a time' });
    expect([foreign.status, foreign.json.error.code]).toEqual([404, 'site_not_found']);
    for (const body of [
      {},
      { to_site_id: cellar },
      { to_site_id: cellar, effective_at: '2026-03-10T10:00:00' },
      { to_site_id: cellar, effective_at: when, site_id: cellar },
    ]) {
      const answer = await move(body);
      expect([JSON.stringify(body), answer.status, answer.json.error.code]).toEqual([
        JSON.stringify(body),
        400,
        'invalid_request',
      ]);
    }
    await createDevice(t, user.token, cellar, { local_id: 'fridge-1' });
    const clash = await move({ to_site_id: cellar, effective_at: when });
    expect([clash.status, clash.json.error.code]).toEqual([409, 'local_id_taken']);

    const third = (await createSite(t, user.token, { name: 'Third' })).id;
    expect((await move({ to_site_id: third, effective_at: when })).status).toBe(200);
    const earlier = await move({ to_site_id: kitchen, effective_at: formatMicros(NOW - 2 * MINUTE) });
    expect([earlier.status, earlier.json.error.code]).toEqual([422, 'invalid_effective_at']);
    expect((await getDevice()).json.site_id).toBe(third);
  });

  it('after delete: the token is refused, the device is 404, its channel stays readable until retention ends', async () => {
    await start({ RETENTION_DAYS: '30' });
    const chn = await ingestHttp(t, device, [
      { ts: NOW - 2 * MINUTE, value: 4 },
      { ts: NOW - MINUTE, value: 6 },
    ]);
    expect((await t.http.delete(`/v1/devices/${device.id}`, { token: user.token })).status).toBe(204);

    const refused = await t.http.post(
      '/v1/ingest',
      { device: 'fridge-1', measurements: [{ type: 'temperature', value: 1 }] },
      { token: device.ingest_token },
    );
    expect([refused.status, refused.json.error.code]).toEqual([401, 'token_invalid']);
    const gone = await getDevice();
    expect([gone.status, gone.json.error.code]).toEqual([404, 'device_not_found']);

    const raw = await t.http.get(`/v1/channels/${chn}/measurements`, { token: user.token });
    expect(raw.json.data.map((p: { value: number }) => p.value)).toEqual([4, 6]);
    const mean = await t.http.get(`/v1/channels/${chn}/measurements?agg=1h`, { token: user.token });
    expect(mean.json.data).toEqual([{ ts: '2026-03-10T11:00:00.000000Z', value: 5 }]);
    expect((await exportedMeasurements(t, user.token)).map((r) => r.value)).toEqual(['4', '6']);

    // Past RETENTION_DAYS the retention job removes the data and the channel is gone.
    clock.set(NOW + 31 * DAY);
    const result = await t.cloud.services.retention.run();
    expect(result.deleted).toBe(2);
    const after = await t.http.get(`/v1/channels/${chn}/measurements`, { token: user.token });
    expect([after.status, after.json.error.code]).toEqual([404, 'channel_not_found']);
    expect(await exportedMeasurements(t, user.token)).toEqual([]);
  });
});
