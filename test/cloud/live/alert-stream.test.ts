import { afterEach, describe, expect, it } from '@jest/globals';
import { DATABASES } from '../../helpers/databases.ts';
import { SseClient } from '../../helpers/sse.ts';
import { MINUTE, rulesWorld, T0, type RulesWorld } from '../rules/world.ts';

/**
 * `GET /app/api/stream` and alert rules: the alert engine's events reach the account's stream as
 * `alarm.*` with the rule, severity and condition, and the sensor follows with its `alert_severity`.
 */
describe.each(DATABASES)('alert-rule alarms on the dashboard stream on %s', (db) => {
  let w: RulesWorld;
  let live: SseClient | null = null;
  afterEach(async () => {
    live?.close();
    await w?.t.stop();
  });

  async function settle(): Promise<void> {
    await w.t.cloud.services.rules.drain();
    await w.t.cloud.services.alertEngine.drain();
  }

  it('delivers an alert alarm opening and resolving, and the sensor with its severity', async () => {
    w = await rulesWorld(db);
    const channel = await w.send(T0, 3);
    await settle();
    const created = await w.t.http.post(
      '/v1/alert-rules',
      {
        name: 'Fridge too warm',
        channel_ids: [channel],
        conditions: [{ type: 'above', value: 8, hysteresis: 0.5, severity: 'critical' }],
      },
      { token: w.user.token },
    );
    expect(created.status).toBe(201);
    live = await SseClient.open(`${w.t.url}/app/api/stream`, { cookie: `os_session=${w.user.cookie}` });
    await live.waitFor('ready');

    w.clock.set(T0 + MINUTE);
    await w.send(T0 + MINUTE, 9.5);
    await settle();
    const opened = await live.waitFor('alarm.opened', (e) => e.rule_id === created.json.id);
    const [event] = await w.events(`?rule_id=${created.json.id}`);
    expect(opened.data).toEqual(event);
    expect(opened.data).toMatchObject({
      kind: 'threshold_high',
      severity: 'critical',
      state: 'open',
      condition: { type: 'above', value: 8, index: 0 },
    });
    await live.waitFor('sensor', (s) => s.alert_severity === 'critical');

    w.clock.set(T0 + 2 * MINUTE);
    await w.send(T0 + 2 * MINUTE, 4);
    await settle();
    const resolved = await live.waitFor('alarm.resolved', (e) => e.id === event.id);
    expect(resolved.data).toMatchObject({ state: 'resolved', severity: 'critical' });
    await live.waitFor('sensor', (s) => s.alert_severity === null && s.last_value === 4);
  });
});
