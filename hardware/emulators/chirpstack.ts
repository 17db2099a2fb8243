import net from 'node:net';
import { Repeat } from './repeat.ts';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { Aedes } from 'aedes';
import { connect, type MqttClient } from 'mqtt';
import integration from '@chirpstack/chirpstack-api/integration/integration_pb.js';
import gw from '@chirpstack/chirpstack-api/gw/gw_pb.js';
import structPb from 'google-protobuf/google/protobuf/struct_pb.js';
import timestampPb from 'google-protobuf/google/protobuf/timestamp_pb.js';
import { cayenneLpp } from './payloads.ts';
import { climate, type ClimateValues } from './values.ts';

export { cayenneLpp };

// CommonJS modules without named exports Node can see: take the classes off the default export.
const { Struct } = structPb;
const { Timestamp } = timestampPb;

export interface UplinkValues extends Partial<ClimateValues> {
  /** The network server's receive time, ms since the epoch (default now). */
  time?: number;
  fCnt?: number;
  rssi?: number;
}

/**
 * A ChirpStack v4 MQTT integration publishing `up` events for one LoRaWAN device
 * (reference/protocols.md, "ChirpStack v4"): `application/<app>/device/<devEui>/event/up`, JSON
 * (the pbjson wire form) or protobuf (`integration.UplinkEvent`). The payload is Cayenne LPP and the
 * decoded `object` is what ChirpStack's LPP codec yields (channel maps), unless `withObject` is false.
 * `serveBroker` runs a plain MQTT broker in place of ChirpStack's own Mosquitto.
 */
export class ChirpstackEmulator {
  private client: MqttClient | null = null;
  private broker: Aedes | null = null;
  private server: net.Server | null = null;
  private readonly repeat: Repeat;
  private fCnt = 0;
  private readonly values: () => ClimateValues;
  readonly applicationId: string;

  constructor(
    private readonly options: {
      brokerUrl?: string;
      devEui: string;
      applicationId?: string;
      encoding?: 'json' | 'protobuf';
      withObject?: boolean;
      intervalMs?: number;
    },
  ) {
    this.repeat = new Repeat(() => this.uplink(), options.intervalMs ?? 10_000);
    this.values = climate(-19);
    this.applicationId = options.applicationId ?? randomUUID();
  }

  /** A broker on `host`:`port` standing in for the network server's Mosquitto; returns its URL. */
  async serveBroker(port = 0, host = '127.0.0.1'): Promise<string> {
    const broker = await Aedes.createBroker();
    const server = net.createServer((s) => broker.handle(s));
    await new Promise<void>((resolve) => server.listen(port, host, () => resolve()));
    this.broker = broker;
    this.server = server;
    const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
    return `mqtt://${shown}:${(server.address() as AddressInfo).port}`;
  }

  async connect(brokerUrl = this.options.brokerUrl): Promise<void> {
    if (!brokerUrl) throw new Error('no broker URL');
    const client = connect(brokerUrl, {
      clientId: `chirpstack-${randomUUID().slice(0, 8)}`,
      protocolVersion: 4,
      reconnectPeriod: 1000,
    });
    client.on('error', () => undefined);
    this.client = client;
    await new Promise<void>((resolve) => client.once('connect', () => resolve()));
  }

  get topic(): string {
    return `application/${this.applicationId}/device/${this.options.devEui}/event/up`;
  }

  /** The event payload for these values, in the configured encoding. */
  event(values: UplinkValues = {}): Buffer {
    const v = { ...this.values(), ...values };
    const fCnt = values.fCnt ?? this.fCnt++;
    const time = new Date(values.time ?? Date.now());
    const data = cayenneLpp(v.temperature, v.humidity);
    const object = {
      temperatureSensor: { '1': Math.round(v.temperature * 10) / 10 },
      humiditySensor: { '2': Math.round(v.humidity * 2) / 2 },
    };
    const rssi = values.rssi ?? -97;
    const withObject = this.options.withObject !== false;
    if (this.options.encoding === 'protobuf') {
      const e = new integration.UplinkEvent();
      e.setDeduplicationId(randomUUID());
      e.setTime(Timestamp.fromDate(time));
      const info = new integration.DeviceInfo();
      info.setTenantId(randomUUID());
      info.setApplicationId(this.applicationId);
      info.setDeviceName('freezer-1');
      info.setDevEui(this.options.devEui);
      e.setDeviceInfo(info);
      e.setFCnt(fCnt);
      e.setFPort(2);
      e.setData(new Uint8Array(data));
      if (withObject) e.setObject(Struct.fromJavaScript(object));
      const rx = new gw.UplinkRxInfo();
      rx.setGatewayId('0016c001ff10a235');
      rx.setRssi(rssi);
      rx.setSnr(7.5);
      e.setRxInfoList([rx]);
      return Buffer.from(e.serializeBinary());
    }
    return Buffer.from(
      JSON.stringify({
        deduplicationId: randomUUID(),
        time: time.toISOString().replace('Z', '+00:00'),
        deviceInfo: {
          tenantId: randomUUID(),
          tenantName: 'ChirpStack',
          applicationId: this.applicationId,
          applicationName: 'cold-chain',
          deviceProfileId: randomUUID(),
          deviceProfileName: 'LPP',
          deviceName: 'freezer-1',
          devEui: this.options.devEui,
          deviceClassEnabled: 'CLASS_A',
          tags: {},
        },
        devAddr: '01f3a5c2',
        adr: true,
        dr: 5,
        fCnt,
        fPort: 2,
        confirmed: false,
        data: data.toString('base64'),
        ...(withObject ? { object } : {}),
        rxInfo: [
          {
            gatewayId: '0016c001ff10a235',
            uplinkId: 4321,
            rssi,
            snr: 7.5,
            channel: 2,
            rfChain: 1,
            context: 'EFwMtA==',
            metadata: { region_common_name: 'EU868' },
          },
        ],
        txInfo: {
          frequency: 868500000,
          modulation: { lora: { bandwidth: 125000, spreadingFactor: 7, codeRate: 'CR_4_5' } },
        },
      }),
    );
  }

  /** Publishes one `up` event (QoS 1, like a persistent integration); resolves on the broker's PUBACK. */
  async uplink(values: UplinkValues = {}): Promise<void> {
    if (!this.client) throw new Error('not connected');
    await this.client.publishAsync(this.topic, this.event(values), { qos: 1 });
  }

  start(): void {
    this.repeat.start();
  }

  async stop(): Promise<void> {
    this.repeat.stop();
    const { client, broker, server } = this;
    this.client = null;
    this.broker = null;
    this.server = null;
    if (client) await client.endAsync();
    if (broker) await new Promise<void>((resolve) => broker.close(() => resolve()));
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
