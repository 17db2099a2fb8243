import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, tempDir } from '../../helpers/databases.ts';
import { createSite } from '../../helpers/fixtures.ts';
import { ROOT } from '../../helpers/process.ts';
import { deviceWith, publish, PUBLIC_ENV, sensorsOf } from './public-helpers.ts';

const run = promisify(execFile);

// Each run of the tool starts Node with tsx (about a second).
jest.setTimeout(120_000);

/**
 * The operator's tool for flags (`npm run admin -- flags`), run as its own process on the database
 * of a running cloud: it lists flags, hides a sensor (gone from the running cloud's next answer),
 * puts it back, and dismisses a flag.
 */
describe.each(DATABASES)('npm run admin -- flags on %s', (db) => {
  let t: TestCloud;
  let roof: string;
  let balcony: string;
  let owner: SignedIn;
  let roofDevice: string;

  beforeAll(async () => {
    t = await startTestCloud({ db, env: PUBLIC_ENV });
    owner = await signUp(t, 'owner@example.com');
    const site = await createSite(t, owner.token);
    const now = Date.now() * 1000;
    const a = await deviceWith(t, owner.token, site.id, now, [{ type: 'temperature', value: 20 }]);
    const b = await deviceWith(t, owner.token, site.id, now, [{ type: 'co2', value: 700 }]);
    await publish(t, owner.token, a.id, { nickname: 'Roof', location_name: 'Oslo', lat: 59.9, lon: 10.7 });
    await publish(t, owner.token, b.id, { nickname: 'Balcony', location_name: 'Rome', lat: 41.9, lon: 12.5 });
    roof = (await sensorsOf(t, owner.token, a.id))[0]!.id;
    roofDevice = a.id;
    balcony = (await sensorsOf(t, owner.token, b.id))[0]!.id;
    for (const [id, reason] of [
      [roof, 'Spam nickname'],
      [roof, 'Always 20 °C'],
      [balcony, 'Indoor sensor'],
    ] as const) {
      expect((await t.http.post(`/api/public/sensors/${id}/report`, { reason })).status).toBe(202);
    }
  });
  afterAll(async () => t?.stop());

  /** Runs the tool against the test cloud's database; answers its exit code and output. */
  async function admin(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    const { url, schema, dataDir } = t.database;
    const databaseUrl = schema ? `${url}?options=${encodeURIComponent(`-c search_path=${schema}`)}` : url;
    try {
      const { stdout, stderr } = await run(
        process.execPath,
        ['--import', 'tsx', 'scripts/admin.ts', ...args],
        {
          cwd: ROOT,
          env: { PATH: process.env.PATH, DATA_DIR: dataDir, DATABASE_URL: databaseUrl },
        },
      );
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  }

  const listed = async (...extra: string[]) => {
    const out = await admin('flags', 'list', '--json', ...extra);
    expect(out.code).toBe(0);
    return JSON.parse(out.stdout) as {
      id: string;
      sensor_id: string;
      reason: string;
      resolution: string | null;
    }[];
  };

  it('refuses public names with control characters, which would reach the map and the operator’s terminal', async () => {
    const answer = await t.http.patch(
      `/v1/devices/${roofDevice}`,
      { public: { nickname: 'Roof\u001b[2J\u001b]0;owned\u0007' } },
      { token: owner.token },
    );
    expect([answer.status, answer.json.error.code]).toEqual([400, 'invalid_request']);
    expect(JSON.stringify(answer.json.error.details)).toContain('control characters');
  });

  it('lists the open flags oldest first, with the sensor they are about', async () => {
    const flags = await listed();
    expect(flags.map((f) => [f.sensor_id, f.reason])).toEqual([
      [roof, 'Spam nickname'],
      [roof, 'Always 20 °C'],
      [balcony, 'Indoor sensor'],
    ]);
    const text = await admin('flags');
    expect(text.code).toBe(0);
    for (const f of flags) expect(text.stdout).toContain(f.id);
    expect(text.stdout).toContain(`sensor ${roof} (temperature, Roof, Oslo)`);
    expect(text.stdout).toContain('"Indoor sensor"');
  });

  it('hides a sensor: the running cloud stops showing it at once, and its flags are resolved', async () => {
    expect((await t.http.get(`/api/public/sensors/${roof}`)).status).toBe(200);
    const out = await admin('flags', 'hide', roof);
    expect(out).toMatchObject({ code: 0, stdout: `sensor ${roof} hidden; 2 open flag(s) resolved\n` });
    expect((await t.http.get(`/api/public/sensors/${roof}`)).status).toBe(404);
    const pins = await t.http.get('/api/public/sensors');
    expect(pins.json.map((p: { id: string }) => p.id)).toEqual([balcony]);
    expect((await listed()).map((f) => f.sensor_id)).toEqual([balcony]);
  });

  it('puts a hidden sensor back', async () => {
    expect((await admin('flags', 'unhide', roof)).code).toBe(0);
    expect((await t.http.get(`/api/public/sensors/${roof}`)).status).toBe(200);
    expect((await admin('flags', 'unhide', roof)).code).toBe(1);
  });

  it('dismisses a flag without hiding anything, and lists resolved flags with --all', async () => {
    const [open] = await listed();
    expect(await admin('flags', 'dismiss', open!.id)).toMatchObject({
      code: 0,
      stdout: `flag ${open!.id} dismissed\n`,
    });
    expect(await listed()).toEqual([]);
    expect((await admin('flags')).stdout).toBe('no open flags\n');
    expect((await listed('--all')).map((f) => f.resolution)).toEqual(['hidden', 'hidden', 'dismissed']);
    expect((await t.http.get(`/api/public/sensors/${balcony}`)).status).toBe(200);
    expect((await admin('flags', 'dismiss', open!.id)).code).toBe(1);
  });

  it('refuses an unknown option with its usage, and a DATA_DIR without the cloud’s database, creating none', async () => {
    const option = await admin('flags', '--bogus');
    expect(option.code).toBe(2);
    expect(option.stderr).toContain('usage: npm run admin -- flags');
    const empty = tempDir('sm-admin-');
    const { stderr } = await run(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', 'flags'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, DATA_DIR: empty },
    }).then(
      () => ({ stderr: 'exited 0' }),
      (err: { code: number; stderr: string }) => ({ stderr: `${err.code} ${err.stderr}` }),
    );
    expect(stderr).toBe(
      `2 no database at ${empty}/cloud.db: set DATA_DIR (or DATABASE_URL) as the cloud's service has it\n`,
    );
    expect(fs.readdirSync(empty)).toEqual([]);
  });

  it('refuses an unknown sensor and an unknown command', async () => {
    const unknown = await admin('flags', 'hide', 'snr_nope');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('sensor_not_found');
    const bad = await admin('flags', 'burn');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('usage: npm run admin -- flags');
  });
});
