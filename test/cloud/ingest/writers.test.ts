import { afterEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createDevice, createSite, type CreatedDevice } from '../../helpers/fixtures.ts';
import { holdIngestWrites } from '../../helpers/row-locks.ts';

/**
 * INGEST_WRITERS on PostgreSQL: at most that many ingest groups are written at once; what arrives
 * meanwhile waits in the process for the next group. Shown with the cloud's writes held (a lock on
 * its ingest journal): each group being written is one backend waiting for that lock, and requests
 * beyond the writers wait in the process (`overloaded()` with INGEST_MAX_PENDING says when they are
 * all there).
 */
const PENDING = 4;

if (DATABASES.includes('postgres'))
  describe('ingest writers on PostgreSQL', () => {
    let t: TestCloud | null = null;
    let probe: pg.Client | null = null;
    afterEach(async () => {
      await probe?.end();
      probe = null;
      await t?.stop();
      t = null;
    });

    it.each([1, 2])('writes at most %i group(s) at once (INGEST_WRITERS)', async (writers) => {
      const cloud = await startTestCloud({
        db: 'postgres',
        // The held writes keep the first group waiting for as long as the checks below take: only
        // INGEST_MAX_PENDING may refuse here, not the oldest request's wait (INGEST_MAX_WAIT_MS).
        env: {
          INGEST_WRITERS: String(writers),
          INGEST_MAX_PENDING: String(PENDING),
          INGEST_MAX_WAIT_MS: '600000',
        },
      });
      t = cloud;
      const user = await signUp(cloud, 'writers@example.com');
      const site = await createSite(cloud, user.token);
      const devices: CreatedDevice[] = [];
      for (let i = 0; i < PENDING; i++)
        devices.push(await createDevice(cloud, user.token, site.id, { local_id: `d${i}` }));
      probe = new pg.Client({
        connectionString: cloud.database.url,
        options: `-c search_path=${cloud.database.schema}`,
      });
      await probe.connect();
      const waiting = async () =>
        (
          await probe!.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND relation = 'ingest_journal'::regclass`,
          )
        ).rows[0]!.n;
      const send = (i: number) =>
        cloud.http.post(
          '/v1/ingest',
          { device: `d${i}`, ts: '2026-01-01T00:00:00Z', measurements: [{ type: 'temperature', value: i }] },
          { token: devices[i]!.ingest_token },
        );

      const release = await holdIngestWrites(cloud.database);
      const answers = [];
      try {
        // One request at a time until every writer holds a group of its own.
        for (let i = 0; i < writers; i++) {
          answers.push(send(i));
          await eventually(async () => (await waiting()) === i + 1, `${i + 1} group(s) waiting for the lock`);
        }
        for (let i = writers; i < PENDING; i++) answers.push(send(i));
        await eventually(
          () => cloud.cloud.services.ingest.overloaded(),
          `${PENDING} requests in the process`,
        );
        expect(await waiting()).toBe(writers);
      } finally {
        await release();
      }
      expect((await Promise.all(answers)).map((a) => a.status)).toEqual(Array(PENDING).fill(200));
    });
  });
