import { describe, expect, it } from '@jest/globals';
import { DATABASES } from '../../helpers/databases.ts';
import { raceEachTest, T0 } from '../rules/world.ts';

/**
 * Two threshold changes of one sensor at once (PostgreSQL). Each writes the whole rule; one built
 * from the rule as read before the other committed put the other's field back as it was.
 */
// Registered where PostgreSQL is (TEST_DATABASE_URL; CI always sets it). SQLite has one writer.
if (DATABASES.includes('postgres'))
  describe('threshold changes at once, on PostgreSQL', () => {
    const race = raceEachTest();

    it('keeps both: the second reads the rule after the first committed', async () => {
      const w = await race.world();
      const channel = await w.send(T0, 3);
      const sensor = await w.sensor(channel);
      // The first change, committing: a higher top of the range.
      const holder = await race.hold('UPDATE sensors SET ok_max = 6 WHERE id = $1', [sensor.id]);
      const second = w.t.http.patch(`/v1/sensors/${sensor.id}`, { grace_min: 10 }, { token: w.user.token });
      await holder.waitingBehind(1, 'the second change to wait for the first');
      await holder.commit();
      const answer = await second;
      expect(answer.status).toBe(200);
      expect(answer.json).toMatchObject({ ok_min: 0, ok_max: 6, grace_min: 10 });
      expect(await w.sensor(channel)).toMatchObject({ ok_max: 6, grace_min: 10 });
    });
  });
