import { describe, expect, it } from '@jest/globals';
import { DATABASES } from '../../helpers/databases.ts';
import { at, MINUTE, raceEachTest, T0 } from '../rules/world.ts';

/**
 * An acknowledgement committed just after the rule engine ended the alarm (PostgreSQL: the engine's
 * transaction holds the event's row, the acknowledgement's update waits for it). The answer and the
 * `alarm.acknowledged` webhook are the event as it then is: resolved, not open as first read.
 */
// Registered where PostgreSQL is (TEST_DATABASE_URL; CI always sets it). SQLite has one writer.
if (DATABASES.includes('postgres'))
  describe('acknowledging while the engine ends the alarm, on PostgreSQL', () => {
    const race = raceEachTest();

    it('answers the event as the engine left it', async () => {
      const w = await race.world();
      await w.send(T0, 3);
      w.clock.set(T0 + 5 * MINUTE);
      await w.send(T0 + 5 * MINUTE, 9);
      await w.tickAt(T0 + 35 * MINUTE);
      const [event] = await w.events();
      expect(event.state).toBe('open');

      const holder = await race.hold('UPDATE alarm_events SET ended_at = $2, updated_at = $2 WHERE id = $1', [
        event.id,
        T0 + 40 * MINUTE,
      ]);
      const acknowledged = w.t.http.post(
        `/v1/events/${event.id}/ack`,
        { note: 'on it' },
        { token: w.user.token },
      );
      await holder.waitingBehind(1, 'the acknowledgement to wait for the engine');
      await holder.commit();
      const answer = await acknowledged;
      expect(answer.status).toBe(200);
      expect(answer.json).toMatchObject({
        state: 'resolved',
        ended_at: at(T0 + 40 * MINUTE),
        ack_note: 'on it',
      });
    });
  });
