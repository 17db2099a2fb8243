import { afterEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { DATABASES } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { rulesWorld, T0, type RulesWorld } from '../rules/world.ts';

/**
 * Two threshold changes of one sensor at once (PostgreSQL). Each writes the whole rule; one built
 * from the rule as read before the other committed put the other's field back as it was.
 */
// Registered where PostgreSQL is (TEST_DATABASE_URL; CI always sets it). SQLite has one writer.
if (DATABASES.includes('postgres'))
  describe('threshold changes at once, on PostgreSQL', () => {
    let w: RulesWorld;
    let holder: pg.Client | undefined;
    afterEach(async () => {
      await holder?.end();
      holder = undefined;
      await w?.t.stop();
    });

    it('keeps both: the second reads the rule after the first committed', async () => {
      w = await rulesWorld('postgres');
      const channel = await w.send(T0, 3);
      const sensor = await w.sensor(channel);
      holder = new pg.Client({
        connectionString: w.t.database.url,
        options: `-c search_path=${w.t.database.schema}`,
      });
      await holder.connect();
      await holder.query('BEGIN');
      // The first change, committing: a higher top of the range.
      await holder.query('UPDATE sensors SET ok_max = 6 WHERE id = $1', [sensor.id]);
      const { rows } = await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const second = w.t.http.patch(`/v1/sensors/${sensor.id}`, { grace_min: 10 }, { token: w.user.token });
      await eventually(async () => {
        const waiting = await holder!.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))',
          [rows[0]!.pid],
        );
        return waiting.rows[0]!.n === 1;
      }, 'the second change to wait for the first');
      await holder.query('COMMIT');
      const answer = await second;
      expect(answer.status).toBe(200);
      expect(answer.json).toMatchObject({ ok_min: 0, ok_max: 6, grace_min: 10 });
      expect(await w.sensor(channel)).toMatchObject({ ok_max: 6, grace_min: 10 });
    });
  });
