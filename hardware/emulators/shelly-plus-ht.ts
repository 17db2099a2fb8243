import { connect, type MqttClient } from 'mqtt';
import { Repeat } from './repeat.ts';
import { climate, type ClimateValues } from './values.ts';

/**
 * A Shelly Plus H&T (second generation) publishing to an MQTT broker as the firmware does with
 * `rpc_ntf` and `status_ntf` on (reference/protocols.md, "Gen2+ MQTT"): retained `<id>/online` `true`
 * with `false` as its last-will, `NotifyStatus` frames on `<id>/events/rpc` carrying the device's own
 * time, `<id>/status/<component>` objects, and answers to `Shelly.GetDeviceInfo` RPC requests on
 * `<id>/rpc`. MQTT 3.1.1 and QoS 1, like the device.
 */
export class ShellyPlusHtEmulator {
  private client: MqttClient | null = null;
  private readonly repeat: Repeat;
  private readonly values: () => ClimateValues;

  constructor(
    private readonly options: { brokerUrl: string; id: string; intervalMs?: number; statusTopics?: boolean },
  ) {
    this.repeat = new Repeat(() => this.report(), options.intervalMs ?? 10_000);
    this.values = climate(21);
  }

  get id(): string {
    return this.options.id;
  }

  async connect(): Promise<void> {
    const id = this.options.id;
    const client = connect(this.options.brokerUrl, {
      clientId: id,
      protocolVersion: 4,
      clean: true,
      reconnectPeriod: 1000,
      will: { topic: `${id}/online`, payload: Buffer.from('false'), qos: 1, retain: true },
    });
    client.on('error', () => undefined); // reconnects by itself, as the device does
    client.on('message', (topic, payload) => {
      if (topic !== `${id}/rpc`) return;
      const request = JSON.parse(payload.toString()) as { id: unknown; src: string; method: string };
      if (request.method !== 'Shelly.GetDeviceInfo') return;
      const result = {
        name: null,
        id,
        mac: id.split('-')[1]?.toUpperCase() ?? '',
        model: 'SNSN-0013A',
        gen: 2,
        fw_id: '20231107-162609/1.0.8-g8d8f5b1',
        ver: '1.0.8',
        app: 'PlusHT',
        auth_en: false,
      };
      client.publish(
        `${request.src}/rpc`,
        JSON.stringify({ id: request.id, src: id, dst: request.src, result }),
        { qos: 1 },
      );
    });
    client.on('connect', () => {
      client.subscribe(`${id}/rpc`, { qos: 1 });
      client.publish(`${id}/online`, 'true', { qos: 1, retain: true });
    });
    this.client = client;
    await new Promise<void>((resolve) => client.once('connect', () => resolve()));
  }

  /** Publishes one report; resolves once the broker acknowledged it (PUBACK), rejects otherwise. */
  async report(values: Partial<ClimateValues> & { ts?: number } = {}): Promise<void> {
    const client = this.client;
    if (!client) throw new Error('not connected');
    const v = { ...this.values(), ...values };
    const id = this.options.id;
    const ts = values.ts ?? Date.now() / 1000;
    const params = {
      ts: Math.round(ts * 100) / 100,
      'temperature:0': { id: 0, tC: v.temperature, tF: Math.round((v.temperature * 9) / 5 + 32) },
      'humidity:0': { id: 0, rh: v.humidity },
      'devicepower:0': {
        id: 0,
        battery: { V: 5.9, percent: Math.round(v.battery) },
        external: { present: false },
      },
    };
    await client.publishAsync(
      `${id}/events/rpc`,
      JSON.stringify({ src: id, dst: `${id}/events`, method: 'NotifyStatus', params }),
      { qos: 1 },
    );
    if (this.options.statusTopics !== false) {
      await client.publishAsync(`${id}/status/temperature:0`, JSON.stringify(params['temperature:0']), {
        qos: 1,
      });
      await client.publishAsync(`${id}/status/humidity:0`, JSON.stringify(params['humidity:0']), { qos: 1 });
    }
  }

  start(): void {
    this.repeat.start();
  }

  /** Drops the connection without DISCONNECT (battery pulled): the broker publishes the last-will. */
  crash(): void {
    this.stop();
    const client = this.client;
    this.client = null;
    client?.stream.destroy();
    client?.end(true);
  }

  stop(): void {
    this.repeat.stop();
  }

  async disconnect(): Promise<void> {
    this.stop();
    const client = this.client;
    this.client = null;
    if (client) await client.endAsync();
  }
}
