import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createWebhook } from '../../helpers/fixtures.ts';

const DAY = 24 * 3600 * 1_000_000;
const NOW = Date.UTC(2026, 10, 2, 9, 0, 0) * 1000;

/** Each delivery keeps its whole message: finished ones go 30 days after they were queued. */
describe.each(DATABASES)('webhook deliveries kept 30 days, on %s', (db) => {
  let t: TestCloud;
  afterEach(async () => t?.stop());

  it('removes finished deliveries and their attempts past 30 days, keeps pending and recent ones', async () => {
    t = await startTestCloud({ db, clock: new ManualClock(NOW), env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    const user = await signUp(t, 'ops@example.com');
    const hook = await createWebhook(t, user.token, ['device.offline']);
    const { db: handle } = t.cloud.services;
    const delivery = (id: string, state: 'pending' | 'delivered' | 'failed', age: number) => ({
      id,
      account_id: user.accountId,
      webhook_id: hook.id,
      type: 'device.offline',
      body: '{}',
      state,
      attempts: 1,
      created_at: NOW - age,
      last_attempt_at: NOW - age,
      next_attempt_at: state === 'pending' ? NOW : null,
      delivered_at: state === 'delivered' ? NOW - age : null,
      last_status: 200,
      last_error: null,
    });
    await handle
      .insertInto('webhook_deliveries')
      .values([
        delivery('whd_old_delivered', 'delivered', 31 * DAY),
        delivery('whd_old_failed', 'failed', 40 * DAY),
        delivery('whd_old_pending', 'pending', 31 * DAY),
        delivery('whd_recent', 'delivered', 29 * DAY),
      ])
      .execute();
    await handle
      .insertInto('webhook_attempts')
      .values(
        ['whd_old_delivered', 'whd_old_failed', 'whd_old_pending', 'whd_recent'].map((id) => ({
          delivery_id: id,
          attempt: 1,
          at: NOW - 29 * DAY,
          status: 200,
          duration_ms: 5,
          error: null,
        })),
      )
      .execute();
    await t.cloud.runMaintenance();
    const left = await handle.selectFrom('webhook_deliveries').select('id').orderBy('id').execute();
    expect(left.map((r) => r.id)).toEqual(['whd_old_pending', 'whd_recent']);
    const attempts = await handle
      .selectFrom('webhook_attempts')
      .select('delivery_id')
      .orderBy('delivery_id')
      .execute();
    expect(attempts.map((r) => r.delivery_id)).toEqual(['whd_old_pending', 'whd_recent']);
  });
});
