import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { retentionCutoff } from '../../../cloud/src/retention/retention.ts';
import { formatMicros } from '../../../shared/time.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite } from '../../helpers/fixtures.ts';
import { at, ingestAsTaken, readAll, READ_ENV } from '../measurements/reads-helpers.ts';

const NOW = at('2026-03-10T12:00:00Z');
const HOUR = 3_600_000_000;
const DAY = 24 * HOUR;

describe('retentionCutoff', () => {
  it('is RETENTION_DAYS before now, rounded down to a UTC day so no rollup bucket straddles it', () => {
    expect(formatMicros(retentionCutoff({ retentionDays: 30 }, NOW))).toBe('2026-02-08T00:00:00.000000Z');
    expect(formatMicros(retentionCutoff({ retentionDays: 730 }, at('2026-03-10T00:00:00Z')))).toBe(
      '2024-03-10T00:00:00.000000Z',
    );
  });
});

describe.each(DATABASES)('retention job on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  afterEach(async () => t?.stop());

  it('removes raw rows and rollups older than the cutoff; reads over what is left still agree', async () => {
    const clock = new ManualClock(NOW);
    t = await startTestCloud({ db, clock, env: { ...READ_ENV, RETENTION_DAYS: '30' } });
    user = await signUp(t, 'keeper@example.com');
    const site = await createSite(t, user.token);
    const device = await createDevice(t, user.token, site.id);
    // One reading every 6 hours for 40 days.
    const readings = Array.from({ length: 160 }, (_, i) => ({ ts: NOW - 40 * DAY + i * 6 * HOUR, value: i }));
    const channelId = await ingestAsTaken(t, clock, device, readings, NOW);
    const cutoff = at('2026-02-08T00:00:00Z');

    const result = await t.cloud.services.retention.run();
    const kept = readings.filter((r) => r.ts >= cutoff);
    expect(result).toMatchObject({ cutoff, deleted: readings.length - kept.length });

    const { db: kdb } = t.cloud.services;
    const raw = await kdb.selectFrom('measurements').select(['ts']).orderBy('ts').execute();
    expect(raw.map((r) => r.ts)).toEqual(kept.map((r) => r.ts));
    const oldRollups = await kdb
      .selectFrom('measurement_rollups')
      .select('bucket')
      .where('bucket', '<', cutoff)
      .execute();
    expect(oldRollups).toEqual([]);

    const range = `from=${encodeURIComponent('2026-01-01T00:00:00Z')}&to=${encodeURIComponent('2026-04-01T00:00:00Z')}`;
    const days = await readAll(
      t,
      user.token,
      `/v1/channels/${channelId}/measurements?agg=1d&fn=count&${range}`,
    );
    expect(days.points[0]!.ts).toBe('2026-02-08T00:00:00.000000Z');
    expect(days.points.reduce((s, p) => s + p.value, 0)).toBe(kept.length);
    const points = await readAll(t, user.token, `/v1/channels/${channelId}/measurements?limit=500&${range}`);
    expect(points.points).toHaveLength(kept.length);

    // A second run finds nothing more to do.
    expect((await t.cloud.services.retention.run()).deleted).toBe(0);
  });
});
