import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { PostgresIngestStore } from '../../../cloud/src/ingest/ingest.store.postgres.ts';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite, measurementCount } from '../../helpers/fixtures.ts';
import { lockedDatabaseEachTest } from '../../helpers/row-locks.ts';

/**
 * Ingest's per-device rate-limit counters (60 requests a minute by default) across processes on one
 * database: exact however many requests arrive at once through however many processes, counted once
 * per request that is stored (a resend too), and not counted for a request that failed.
 *
 * The clouds share a clock that stands in the middle of a minute: on the real one a burst that
 * straddles a minute's end is counted in two windows, and more than the limit is allowed.
 */
const MID_MINUTE = Date.UTC(2026, 0, 5, 10, 0, 45) * 1000;
describe.each(DATABASES)('ingest rate-limit counters on %s', (db) => {
  let a: TestCloud | undefined;
  let b: TestCloud | undefined;

  afterEach(async () => {
    await b?.stop();
    await a?.stop();
    a = b = undefined;
  }, 60_000);

  it('allow exactly the limit to requests sent at once through two processes', async () => {
    // Admission control must not shed either: on PostgreSQL the burst waits for the writers, and a
    // stall of the test's process of INGEST_MAX_WAIT_MS (2 s) would have it answer 503.
    const env = { RATE_LIMIT_INGEST_PER_MIN: '20', INGEST_MAX_WAIT_MS: '600000' };
    const clock = new ManualClock(MID_MINUTE);
    a = await startTestCloud({ db, env, clock });
    b = await startTestCloud({ sameDatabaseAs: a, env, clock });
    const user = await signUp(a, 'rates@example.com', [b]);
    const site = await createSite(a, user.token);
    const device = await createDevice(a, user.token, site.id);
    // Timestamps in the past, one per request: none is a duplicate of another.
    const at = Date.UTC(2026, 0, 5, 10, 0);
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        (i % 2 === 0 ? a! : b!).http.post(
          '/v1/ingest',
          {
            device: device.local_id,
            ts: new Date(at + i * 1000).toISOString(),
            measurements: [{ type: 'temperature', value: i }],
          },
          { token: device.ingest_token },
        ),
      ),
    );
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(20);
    expect(statuses.filter((s) => s === 429)).toHaveLength(10);
    expect(await measurementCount(a)).toBe(20);
  }, 120_000);

  it('count a resend of stored data once per request, as any request', async () => {
    a = await startTestCloud({ db, clock: new ManualClock(MID_MINUTE) });
    const user = await signUp(a, 'resend@example.com');
    const site = await createSite(a, user.token);
    const device = await createDevice(a, user.token, site.id);
    const body = {
      device: device.local_id,
      ts: new Date(Date.UTC(2026, 0, 5, 10, 0)).toISOString(),
      measurements: [{ type: 'temperature', value: 4 }],
    };
    const first = await a.http.post('/v1/ingest', body, { token: device.ingest_token });
    const again = await a.http.post('/v1/ingest', body, { token: device.ingest_token });
    expect([first.status, again.status]).toEqual([200, 200]);
    expect([first.headers.get('x-ratelimit-remaining'), again.headers.get('x-ratelimit-remaining')]).toEqual([
      '59',
      '58',
    ]);
    expect(await measurementCount(a)).toBe(1);
  }, 120_000);
});

// Registered where PostgreSQL is (TEST_DATABASE_URL; CI always sets it), as DATABASES does.
if (DATABASES.includes('postgres'))
  describe('ingest rate-limit counters on PostgreSQL, in the store', () => {
    const each = lockedDatabaseEachTest('rate-counters');

    const WINDOW = 1_800_000_000;
    const countOf = async (bucket: string) =>
      (
        await each.database.db
          .selectFrom('rate_limit_counters')
          .select('count')
          .where('bucket', '=', bucket)
          .where('window_start', '=', WINDOW)
          .executeTakeFirst()
      )?.count;

    it('are not held while the group that counted is still being written', async () => {
      const store = new PostgresIngestStore(each.locks.pool);
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let counted!: () => void;
      const hasCounted = new Promise<void>((resolve) => (counted = resolve));
      const unit = store.transaction(async (tx) => {
        const after = await tx.addRateHits([{ bucket: 'ingest:dev_x', count: 2 }], WINDOW);
        counted();
        await held; // the group's other steps and its write
        return after;
      });
      await hasCounted;
      // Another group (another replica's) may count now, not after this group's commit.
      expect(
        await each.locks.lockable(
          'SELECT 1 FROM rate_limit_counters WHERE bucket = $1 FOR UPDATE NOWAIT',
          'ingest:dev_x',
        ),
      ).toBe(true);
      release();
      expect((await unit).get('ingest:dev_x')).toBe(2);
      expect(await countOf('ingest:dev_x')).toBe(2);
    });

    it('are taken back when the group fails after counting', async () => {
      const store = new PostgresIngestStore(each.locks.pool);
      await store.transaction((tx) =>
        Promise.resolve(tx.addRateHits([{ bucket: 'ingest:dev_y', count: 1 }], WINDOW)),
      );
      const failed = store.transaction(async (tx) => {
        await tx.addRateHits([{ bucket: 'ingest:dev_y', count: 3 }], WINDOW);
        throw new Error('the write failed');
      });
      await expect(failed).rejects.toThrow('the write failed');
      expect(await countOf('ingest:dev_y')).toBe(1);
    });
  });
