import type { MqttClient } from 'mqtt';

/** Ends a client, not waiting longer than `ms` (a socket that is already gone has nothing to wait for). */
export async function endWithin(client: MqttClient, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    client.endAsync(true).catch(() => undefined),
    new Promise<void>((resolve) => (timer = setTimeout(resolve, ms))),
  ]);
  clearTimeout(timer);
}
