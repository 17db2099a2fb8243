import type { AuditRepository } from '../audit/audit.repository.ts';
import { BridgeDevices } from '../bridges/bridge-devices.ts';
import { BridgesRepository } from '../bridges/bridges.repository.ts';
import { BridgesService } from '../bridges/bridges.service.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { DevicesRepository } from '../devices/devices.repository.ts';
import type { Ingest } from '../ingest/ingest.types.ts';
import type { NotificationHub } from '../hub/notification-hub.ts';
import type { RateLimiter } from '../limits/rate-limiter.ts';
import type { Logger } from '../logger.ts';
import { BridgePki } from '../pki/pki.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';
import type { DatabaseOutageLog } from '../storage/outage-log.ts';
import { MqttBridge } from './mqtt-bridge.ts';

/**
 * The MQTT bridge endpoint, the bridges it admits and the CA that certifies them: their slice of
 * the services.
 */
export function buildMqtt(deps: {
  db: Db;
  clock: Clock;
  config: Config;
  log: Logger;
  audit: AuditRepository;
  sites: SitesRepository;
  devicesRepository: DevicesRepository;
  ingest: Ingest;
  hub: NotificationHub;
  rateLimiter: RateLimiter;
  dbOutage?: DatabaseOutageLog;
}): {
  pki: BridgePki;
  bridgesRepository: BridgesRepository;
  /** The MQTT bridge endpoint; started by `Cloud.start()` unless MQTT_PORT is 0. */
  mqtt: MqttBridge;
  bridges: BridgesService;
} {
  const { db, clock, config, log, audit, sites, devicesRepository, ingest, hub, rateLimiter, dbOutage } =
    deps;
  const pki = new BridgePki({ config: config.pki, clock, log: log.child({ module: 'pki' }), db });
  const bridgesRepository = new BridgesRepository();
  const mqtt = new MqttBridge({
    db,
    clock,
    log: log.child({ module: 'mqtt' }),
    pki,
    bridges: bridgesRepository,
    devices: new BridgeDevices({
      db,
      clock,
      devices: devicesRepository,
      sites,
      audit,
      rateLimiter,
      log: log.child({ module: 'mqtt' }),
    }),
    ingest,
    hub,
    redis: config.redis,
    dbOutage,
  });
  const bridges = new BridgesService({
    db,
    clock,
    pki,
    bridges: bridgesRepository,
    sites,
    audit,
    connections: mqtt,
    mqttUrl: () =>
      config.mqttUrl ?? `mqtts://${new URL(config.baseUrl).hostname}:${mqtt.port || config.mqttPort || 8883}`,
  });
  return { pki, bridgesRepository, mqtt, bridges };
}
