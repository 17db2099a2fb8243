import { afterEach, describe, expect, it } from '@jest/globals';
import { sql } from 'kysely';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { createMonth } from '../../../cloud/src/storage/partitions.ts';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite } from '../../helpers/fixtures.ts';
import { at, ingestAsTaken, readAll, READ_ENV } from '../measurements/reads-helpers.ts';

const NOW = at('2026-05-10T12:00:00Z');
const HOUR = 3_600_000_000;

/** The measurement partitions of the test's schema, by name. */
async function partitions(t: TestCloud): Promise<string[]> {
  const rows = await sql<{ name: string }>`SELECT c.relname AS name FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
    WHERE p.relname = 'measurements' AND p.relnamespace = current_schema()::regnamespace
    ORDER BY 1`.execute(t.cloud.services.db);
  return rows.rows.map((r) => r.name);
}

describe.each(DATABASES.filter((d) => d === 'postgres'))('retention by partition on %s', (db) => {
  let t: TestCloud;
  afterEach(async () => t?.stop());

  it('drops whole months past the cutoff, trims the boundary month row by row, and reads the kept range alike', async () => {
    const clock = new ManualClock(NOW);
    // 60 days before 2026-05-10 12:00, rounded down to a day: 2026-03-11.
    t = await startTestCloud({ db, clock, env: { ...READ_ENV, RETENTION_DAYS: '60' } });
    const { database } = t.cloud.services;
    for (const month0 of [0, 1, 2]) await createMonth(database, 2026, month0);
    const user = await signUp(t, 'keeper@example.com');
    const site = await createSite(t, user.token);
    const device = await createDevice(t, user.token, site.id);
    // One reading every 6 hours from 2026-01-05 to now: January to May.
    const start = at('2026-01-05T00:00:00Z');
    const readings = Array.from({ length: Math.floor((NOW - start) / (6 * HOUR)) }, (_, i) => ({
      ts: start + i * 6 * HOUR,
      value: i % 97,
    }));
    const channelId = await ingestAsTaken(t, clock, device, readings, NOW);
    expect(await partitions(t)).toEqual(
      expect.arrayContaining([
        'measurements_y2026m01',
        'measurements_y2026m02',
        'measurements_y2026m03',
        'measurements_y2026m04',
        'measurements_y2026m05',
      ]),
    );

    const cutoff = at('2026-03-11T00:00:00Z');
    const kept = readings.filter((r) => r.ts >= cutoff);
    const range = `from=${encodeURIComponent('2026-03-11T00:00:00Z')}&to=${encodeURIComponent('2026-05-11T00:00:00Z')}`;
    const rawPath = `/v1/channels/${channelId}/measurements?limit=500&${range}`;
    const dayPath = `/v1/channels/${channelId}/measurements?agg=1d&fn=mean&${range}`;
    const rawBefore = await readAll(t, user.token, rawPath);
    const daysBefore = await readAll(t, user.token, dayPath);
    expect(rawBefore.points).toHaveLength(kept.length);

    // The engines' passes over the new readings hold their reads of the months until they commit,
    // and a month is dropped only if its lock comes within 5 s (else at the next run): on a loaded
    // machine a pass can take that long, so they finish first.
    await t.cloud.services.rules.drain();
    await t.cloud.services.alertEngine.drain();
    const result = await t.cloud.services.retention.run();

    // January and February went whole; March, at the boundary, lost its first ten days row by row.
    expect(result.cutoff).toBe(cutoff);
    expect(result.droppedPartitions).toEqual(['measurements_y2026m01', 'measurements_y2026m02']);
    const trimmed = readings.filter((r) => r.ts >= at('2026-03-01T00:00:00Z') && r.ts < cutoff);
    expect(result.deleted).toBe(trimmed.length);
    const names = await partitions(t);
    expect(names).not.toContain('measurements_y2026m01');
    expect(names).not.toContain('measurements_y2026m02');
    expect(names).toContain('measurements_y2026m03');
    const march = await sql<{ n: number; first: number }>`
      SELECT count(*)::int AS n, min(ts) AS first FROM measurements_y2026m03`.execute(t.cloud.services.db);
    expect(march.rows[0]).toEqual({
      n: readings.filter((r) => r.ts >= cutoff && r.ts < at('2026-04-01T00:00:00Z')).length,
      first: cutoff,
    });
    const left = await t.cloud.services.db.selectFrom('measurements').select('ts').orderBy('ts').execute();
    expect(left.map((r) => r.ts)).toEqual(kept.map((r) => r.ts));

    // Reads over the kept range answer exactly as before.
    expect(await readAll(t, user.token, rawPath)).toEqual(rawBefore);
    expect(await readAll(t, user.token, dayPath)).toEqual(daysBefore);

    // A second run finds nothing more to do.
    expect(await t.cloud.services.retention.run()).toMatchObject({ deleted: 0, droppedPartitions: [] });
  });
});

describe.each(DATABASES.filter((d) => d === 'sqlite'))('retention on %s (one table)', (db) => {
  let t: TestCloud;
  afterEach(async () => t?.stop());

  it('drops no partition and deletes row by row', async () => {
    const clock = new ManualClock(NOW);
    t = await startTestCloud({ db, clock, env: { ...READ_ENV, RETENTION_DAYS: '60' } });
    const user = await signUp(t, 'keeper@example.com');
    const device = await createDevice(t, user.token, (await createSite(t, user.token)).id);
    await ingestAsTaken(
      t,
      clock,
      device,
      [
        { ts: at('2026-01-10T00:00:00Z'), value: 1 },
        { ts: at('2026-05-01T00:00:00Z'), value: 2 },
      ],
      NOW,
    );
    expect(await t.cloud.services.retention.run()).toMatchObject({ deleted: 1, droppedPartitions: [] });
  });
});
