import { formatSeconds } from '../../../shared/time.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { param, userOf } from '../http/context.ts';
import type { RouteDef } from '../http/route-table.ts';
import type { SensorsService } from '../sensors/sensors.service.ts';
import { RECOMPUTE_WINDOW_MICROS, type RuleEngine } from './rule-engine.ts';

/** What these routes use; the composition root passes them in. */
export interface RuleRoutesDeps {
  sensors: SensorsService;
  rules: Pick<RuleEngine, 'recompute'>;
  audit: AuditRepository;
  clock: Clock;
}

export function ruleRoutes(s: RuleRoutesDeps): RouteDef[] {
  const { sensors, rules, audit, clock } = s;
  return [
    {
      method: 'post',
      path: '/v1/sensors/:sensor_id/recompute',
      auth: 'user',
      summary:
        'Replay the rule engine over the last 24 hours of measurements; emits missed events; idempotent',
      success: { status: 200, description: '{replayed, events_created, events_updated, events_withdrawn}' },
      errors: ['sensor_not_found'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        const sensor = await sensors.find(user.accountId, param(req, 'sensor_id'));
        const result = await rules.recompute(sensor.seq, async (db, r) => {
          const now = clock.nowMicros();
          await audit.record(db, {
            accountId: user.accountId,
            kind: 'sensor.recomputed',
            by: user.userId,
            target: sensor.id,
            details: {
              channel_id: sensor.channel_id,
              from: formatSeconds(now - RECOMPUTE_WINDOW_MICROS),
              to: formatSeconds(now),
              replayed: r.replayed,
              events_created: r.eventsCreated,
              events_updated: r.eventsUpdated,
              events_withdrawn: r.eventsWithdrawn,
            },
            ts: now,
          });
        });
        return {
          status: 200,
          body: {
            replayed: result.replayed,
            events_created: result.eventsCreated,
            events_updated: result.eventsUpdated,
            events_withdrawn: result.eventsWithdrawn,
          },
        };
      },
    },
  ];
}
