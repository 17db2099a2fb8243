import type { RulesWorld } from '../rules/world.ts';

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
