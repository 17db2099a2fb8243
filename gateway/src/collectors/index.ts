import type { Collector, CollectorDeps } from '../collector.ts';
import type { GatewayConfig } from '../config.ts';
import { ChirpstackCollector } from './chirpstack/chirpstack.collector.ts';
import { SerialCollector } from './serial/serial.collector.ts';
import { ShellyHttpCollector } from './shelly-http/shelly-http.collector.ts';
import { ShellyMqttCollector } from './shelly-mqtt/shelly-mqtt.collector.ts';

/** The collectors the configuration enables, each with its own logger namespace and counters. */
export function createCollectors(config: GatewayConfig, deps: (name: string) => CollectorDeps): Collector[] {
  const c = config.collectors;
  const out: Collector[] = [];
  if (c.shelly_http?.enabled)
    out.push(new ShellyHttpCollector({ ...deps('shelly-http'), config: c.shelly_http }));
  if (c.shelly_mqtt?.enabled)
    out.push(new ShellyMqttCollector({ ...deps('shelly-mqtt'), config: c.shelly_mqtt }));
  if (c.serial?.enabled) out.push(new SerialCollector({ ...deps('serial'), config: c.serial }));
  if (c.chirpstack?.enabled) {
    out.push(
      new ChirpstackCollector({ ...deps('chirpstack'), config: c.chirpstack, gatewayId: config.gatewayId }),
    );
  }
  return out;
}
