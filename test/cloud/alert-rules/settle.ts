import { T0, type RulesWorld } from '../rules/world.ts';

/** Lets the simple rule engine, the alert engine and the job queue finish what they were given. */
export async function settleAlerts(w: RulesWorld): Promise<void> {
  await w.t.cloud.services.rules.drain();
  await w.t.cloud.services.alertEngine.drain();
  await w.t.cloud.services.jobs.drain();
}

/** Moves the world's clock to `ts` (never back), sends a reading and settles; answers its channel. */
export async function sendSettled(
  w: RulesWorld,
  ts: number,
  value: number,
  type = 'temperature',
): Promise<string> {
  w.clock.set(Math.max(w.clock.nowMicros(), ts));
  const channel = await w.send(ts, value, type);
  await settleAlerts(w);
  return channel;
}

/** The second user of a world's account, `usr_manager`: the later escalation steps' recipient. */
export const MANAGER = 'manager@example.com';

export async function addManager(w: RulesWorld): Promise<void> {
  await w.t.cloud.services.db
    .insertInto('users')
    .values({ id: 'usr_manager', account_id: w.user.accountId, email: MANAGER, created_at: T0 })
    .execute();
}

/**
 * A rule on one channel, critical above 8: the user is told at once, the manager after
 * `managerAfterMin`, and both again every `repeatEveryMin` (none without it). Answers the rule's id.
 */
export async function escalatingRule(
  w: RulesWorld,
  channel: string,
  managerAfterMin: number,
  repeatEveryMin?: number,
): Promise<string> {
  const rule = await w.t.http.post(
    '/v1/alert-rules',
    {
      name: 'Fridge',
      channel_ids: [channel],
      conditions: [{ type: 'above', value: 8, severity: 'critical' }],
      notify: {
        steps: [
          { after_min: 0, user_ids: [w.user.userId] },
          { after_min: managerAfterMin, user_ids: ['usr_manager'] },
        ],
        ...(repeatEveryMin === undefined ? {} : { repeat_every_min: repeatEveryMin }),
      },
    },
    { token: w.user.token },
  );
  if (rule.status !== 201) throw new Error(`${rule.status} ${rule.text}`);
  return rule.json.id as string;
}
