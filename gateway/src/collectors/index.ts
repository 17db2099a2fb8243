import type { Collector, CollectorDeps } from '../collector.ts';
import type { GatewayConfig } from '../config.ts';

/**
 * The collectors the configuration enables, each with its own logger namespace and counters. Each
 * collector's module (and its libraries: aedes, serialport, the ChirpStack protobuf classes) is
 * loaded only when enabled, which keeps a Pi's memory for what it runs.
 */
export async function createCollectors(
  config: GatewayConfig,
  deps: (name: string) => CollectorDeps,
): Promise<Collector[]> {
  const c = config.collectors;
  const out: Collector[] = [];
  if (c.shelly_http?.enabled) {
    const { ShellyHttpCollector } = await import('./shelly-http/shelly-http.collector.ts');
    out.push(new ShellyHttpCollector({ ...deps('shelly-http'), config: c.shelly_http }));
  }
  if (c.shelly_mqtt?.enabled) {
    const { ShellyMqttCollector } = await import('./shelly-mqtt/shelly-mqtt.collector.ts');
    out.push(new ShellyMqttCollector({ ...deps('shelly-mqtt'), config: c.shelly_mqtt }));
  }
  if (c.serial?.enabled) {
    const { SerialCollector } = await import('./serial/serial.collector.ts');
    out.push(new SerialCollector({ ...deps('serial'), config: c.serial }));
  }
  if (c.chirpstack?.enabled) {
    const { ChirpstackCollector } = await import('./chirpstack/chirpstack.collector.ts');
    out.push(
      new ChirpstackCollector({ ...deps('chirpstack'), config: c.chirpstack, gatewayId: config.gatewayId }),
    );
  }
  return out;
}
