import { afterEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { DATABASES } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { at, MINUTE, rulesWorld, T0, type RulesWorld } from '../rules/world.ts';

/**
 * An acknowledgement committed just after the rule engine ended the alarm (PostgreSQL: the engine's
 * transaction holds the event's row, the acknowledgement's update waits for it). The answer and the
 * `alarm.acknowledged` webhook are the event as it then is: resolved, not open as first read.
 */
// Registered where PostgreSQL is (TEST_DATABASE_URL; CI always sets it). SQLite has one writer.
if (DATABASES.includes('postgres'))
  describe('acknowledging while the engine ends the alarm, on PostgreSQL', () => {
    let w: RulesWorld;
    let holder: pg.Client | undefined;
    afterEach(async () => {
      await holder?.end();
      holder = undefined;
      await w?.t.stop();
    });

    it('answers the event as the engine left it', async () => {
      w = await rulesWorld('postgres');
      await w.send(T0, 3);
      w.clock.set(T0 + 5 * MINUTE);
      await w.send(T0 + 5 * MINUTE, 9);
      await w.tickAt(T0 + 35 * MINUTE);
      const [event] = await w.events();
      expect(event.state).toBe('open');

      holder = new pg.Client({
        connectionString: w.t.database.url,
        options: `-c search_path=${w.t.database.schema}`,
      });
      await holder.connect();
      await holder.query('BEGIN');
      await holder.query('UPDATE alarm_events SET ended_at = $2, updated_at = $2 WHERE id = $1', [
        event.id,
        T0 + 40 * MINUTE,
      ]);
      const { rows } = await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const acknowledged = w.t.http.post(
        `/v1/events/${event.id}/ack`,
        { note: 'on it' },
        { token: w.user.token },
      );
      await eventually(async () => {
        const waiting = await holder!.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))',
          [rows[0]!.pid],
        );
        return waiting.rows[0]!.n === 1;
      }, 'the acknowledgement to wait for the engine');
      await holder.query('COMMIT');
      const answer = await acknowledged;
      expect(answer.status).toBe(200);
      expect(answer.json).toMatchObject({
        state: 'resolved',
        ended_at: at(T0 + 40 * MINUTE),
        ack_note: 'on it',
      });
    });
  });
