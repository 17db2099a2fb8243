import type { AlertEngine } from '../alert-rules/alert-engine.ts';
import type { AuthService } from '../auth/auth.service.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { DevicesService } from '../devices/devices.service.ts';
import type { EventsService } from '../events/events.service.ts';
import type { NotificationHub } from '../hub/notification-hub.ts';
import type { Ingest } from '../ingest/ingest.types.ts';
import type { PublicService } from '../public/public.service.ts';
import type { Logger } from '../logger.ts';
import type { RuleEngine } from '../rules/rule-engine.ts';
import type { SensorsRepository } from '../sensors/sensors.repository.ts';
import type { SensorsService } from '../sensors/sensors.service.ts';
import type { Db } from '../storage/database.ts';
import { LiveUpdates } from './live.service.ts';
import { LiveStreams } from './live.stream.ts';

/**
 * The dashboard's live updates: the publisher (to the platform's notification hub) told by ingest's fold, the rule
 * engine, the alert engine, rule changes, acknowledgements, device state and sign-outs after each commit, and the
 * open streams.
 */
export function buildLive(deps: {
  db: Db;
  clock: Clock;
  config: Pick<Config, 'liveMaxStreams'>;
  log: Logger;
  hub: NotificationHub;
  ingest: Ingest;
  rules: RuleEngine;
  alertEngine: AlertEngine;
  events: EventsService;
  sensors: SensorsService;
  sensorsRepository: SensorsRepository;
  devices: DevicesService;
  publicApi: PublicService;
  authService: AuthService;
}): { liveUpdates: LiveUpdates; liveStreams: LiveStreams } {
  const {
    db,
    clock,
    config,
    hub,
    ingest,
    rules,
    alertEngine,
    events,
    sensors,
    sensorsRepository,
    devices,
    publicApi,
    authService,
  } = deps;
  const log = deps.log.child({ module: 'live' });
  const liveUpdates = new LiveUpdates({ db, hub, sensorsRepository });
  ingest.onFolded((seqs) => liveUpdates.folded(seqs));
  ingest.onDeviceState((changes) => liveUpdates.devicesChanged(changes));
  rules.onChanges((changes) => liveUpdates.evaluated(changes));
  alertEngine.onChanges((changes) => liveUpdates.alertsChanged(changes));
  events.onAcknowledged((event) => liveUpdates.acknowledged(event));
  sensors.onRuleUpdated((sensor) => liveUpdates.ruleUpdated(sensor));
  authService.onSessionsEnded((ended) => liveUpdates.sessionsEnded(ended));
  const liveStreams = new LiveStreams({
    hub,
    log,
    sensors,
    events,
    devices,
    publicSettings: (ids) => publicApi.settingsOf(ids),
    sessionEnd: (sessionId) => authService.liveSessionEnd(sessionId),
    nowMicros: () => clock.nowMicros(),
    maxStreams: config.liveMaxStreams,
  });
  return { liveUpdates, liveStreams };
}
