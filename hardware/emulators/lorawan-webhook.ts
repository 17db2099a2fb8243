import { randomUUID } from 'node:crypto';
import common from '@chirpstack/chirpstack-api/common/common_pb.js';
import integration from '@chirpstack/chirpstack-api/integration/integration_pb.js';
import gw from '@chirpstack/chirpstack-api/gw/gw_pb.js';
import jspb from 'google-protobuf';
import durationPb from 'google-protobuf/google/protobuf/duration_pb.js';
import structPb from 'google-protobuf/google/protobuf/struct_pb.js';
import timestampPb from 'google-protobuf/google/protobuf/timestamp_pb.js';
import { cayenneLpp } from './payloads.ts';
import { climate, type ClimateValues } from './values.ts';

// CommonJS modules without named exports Node can see: take the classes off the default export.
const { Struct } = structPb;
const { Timestamp } = timestampPb;
const { Duration } = durationPb;

/**
 * LoRaWAN network servers delivering to the cloud's webhooks (docs/api/integrations.md): the
 * bodies ChirpStack v4's HTTP integration and The Things Stack v3's webhooks send, byte for byte as
 * they serialise them, and an emulator posting them. ChirpStack's JSON is pbjson with `emit_fields`
 * (camelCase, `data` in base64, default scalars such as `fCnt: 0` and `confirmed: false` present,
 * sub-messages such as `object` only when set); its protobuf is `integration.UplinkEvent` built with
 * @chirpstack/chirpstack-api's own classes. The Things Stack omits every empty, zero or false field.
 */

export interface Reception {
  gatewayId: string;
  rssi: number;
  snr: number;
}

export interface ChirpstackUp {
  devEui: string;
  deduplicationId?: string;
  /** ms since the epoch; null leaves `time` out. */
  time?: number | null;
  fCnt?: number;
  fPort?: number;
  data: Buffer;
  /** The device profile codec's output; absent when the profile has none. */
  object?: Record<string, unknown>;
  rx?: Reception[];
}

const TENANT = '52f14cd4-c6f1-4fbd-8f87-4025e1d49242';
const APPLICATION = '17c82e96-be03-4f38-aef3-f83d48582d97';
const PROFILE = '14855bf7-d10d-4aee-b618-ebfcb64dc7ad';
const DEFAULT_RX: Reception[] = [{ gatewayId: '0016c001f153a14c', rssi: -97, snr: 7.5 }];

/** ChirpStack's RFC 3339 with nanoseconds and `+00:00`. */
function chirpstackTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000000+00:00');
}

function deviceInfoJson(devEui: string) {
  return {
    tenantId: TENANT,
    tenantName: 'ChirpStack',
    applicationId: APPLICATION,
    applicationName: 'cold-chain',
    deviceProfileId: PROFILE,
    deviceProfileName: 'sensors',
    deviceName: `sensor-${devEui.slice(-4)}`,
    devEui,
    deviceClassEnabled: 'CLASS_A',
    tags: {},
  };
}

/** An `up` event as ChirpStack v4 serialises it to JSON. */
export function chirpstackUpJson(up: ChirpstackUp): string {
  const time = up.time === undefined ? Date.now() : up.time;
  return JSON.stringify({
    deduplicationId: up.deduplicationId ?? randomUUID(),
    ...(time === null ? {} : { time: chirpstackTime(time) }),
    deviceInfo: deviceInfoJson(up.devEui),
    devAddr: '00189440',
    adr: true,
    dr: 0,
    fCnt: up.fCnt ?? 0,
    fPort: up.fPort ?? 1,
    confirmed: false,
    data: up.data.toString('base64'),
    ...(up.object ? { object: up.object } : {}),
    rxInfo: (up.rx ?? DEFAULT_RX).map((r, i) => ({
      gatewayId: r.gatewayId,
      uplinkId: 4217106255 + i,
      ...(time === null ? {} : { nsTime: chirpstackTime(time) }),
      rssi: r.rssi,
      snr: r.snr,
      channel: 2,
      rfChain: 1,
      location: {},
      context: 'EFwMtA==',
      metadata: { region_common_name: 'EU868', region_config_id: 'eu868' },
      crcStatus: 'CRC_OK',
    })),
    txInfo: {
      frequency: 868500000,
      modulation: { lora: { bandwidth: 125000, spreadingFactor: 12, codeRate: 'CR_4_5' } },
    },
    regionConfigId: 'eu868',
  });
}

function deviceInfoPb(devEui: string): integration.DeviceInfo {
  const info = new integration.DeviceInfo();
  info.setTenantId(TENANT);
  info.setTenantName('ChirpStack');
  info.setApplicationId(APPLICATION);
  info.setApplicationName('cold-chain');
  info.setDeviceProfileId(PROFILE);
  info.setDeviceProfileName('sensors');
  info.setDeviceName(`sensor-${devEui.slice(-4)}`);
  info.setDevEui(devEui);
  return info;
}

/** An `up` event as ChirpStack v4 encodes it with the protobuf encoding. */
export function chirpstackUpProtobuf(up: ChirpstackUp): Buffer {
  const time = up.time === undefined ? Date.now() : up.time;
  const e = new integration.UplinkEvent();
  e.setDeduplicationId(up.deduplicationId ?? randomUUID());
  if (time !== null) e.setTime(Timestamp.fromDate(new Date(time)));
  e.setDeviceInfo(deviceInfoPb(up.devEui));
  e.setDevAddr('00189440');
  e.setAdr(true);
  e.setFCnt(up.fCnt ?? 0);
  e.setFPort(up.fPort ?? 1);
  e.setData(new Uint8Array(up.data));
  if (up.object) e.setObject(Struct.fromJavaScript(up.object as Record<string, never>));
  e.setRxInfoList(
    (up.rx ?? DEFAULT_RX).map((r) => {
      const rx = new gw.UplinkRxInfo();
      rx.setGatewayId(r.gatewayId);
      rx.setRssi(r.rssi);
      rx.setSnr(r.snr);
      return rx;
    }),
  );
  return Buffer.from(e.serializeBinary());
}

/** A `status` event (the device's DevStatusAns) in JSON. */
export function chirpstackStatusJson(
  devEui: string,
  batteryLevel: number | null | 'external',
  time = Date.now(),
): string {
  return JSON.stringify({
    deduplicationId: randomUUID(),
    time: chirpstackTime(time),
    deviceInfo: deviceInfoJson(devEui),
    margin: 7,
    externalPowerSource: batteryLevel === 'external',
    batteryLevelUnavailable: batteryLevel === null,
    batteryLevel: typeof batteryLevel === 'number' ? batteryLevel : 0,
  });
}

/** A `status` event in protobuf; `external`: the device runs on external power (battery level 0). */
export function chirpstackStatusProtobuf(
  devEui: string,
  batteryLevel: number | 'external',
  time = Date.now(),
): Buffer {
  const e = new integration.StatusEvent();
  e.setDeduplicationId(randomUUID());
  e.setTime(Timestamp.fromDate(new Date(time)));
  e.setDeviceInfo(deviceInfoPb(devEui));
  e.setMargin(7);
  e.setExternalPowerSource(batteryLevel === 'external');
  e.setBatteryLevel(batteryLevel === 'external' ? 0 : batteryLevel);
  return Buffer.from(e.serializeBinary());
}

/** A `join` event in JSON. */
export function chirpstackJoinJson(devEui: string, time = Date.now()): string {
  return JSON.stringify({
    deduplicationId: randomUUID(),
    time: chirpstackTime(time),
    deviceInfo: deviceInfoJson(devEui),
    devAddr: '00189440',
    regionConfigId: 'eu868',
  });
}

/** A `log` event in JSON. */
export function chirpstackLogJson(devEui: string, time = Date.now()): string {
  return JSON.stringify({
    time: chirpstackTime(time),
    deviceInfo: deviceInfoJson(devEui),
    level: 'ERROR',
    code: 'UPLINK_CODEC',
    description: 'js execution error',
    context: { deduplication_id: randomUUID() },
  });
}

/** The ChirpStack events other than `up` and `status`, which store nothing but are recorded. */
export type ChirpstackOtherEvent = 'join' | 'ack' | 'txack' | 'log' | 'location' | 'integration';

/**
 * An event other than `up` and `status` as ChirpStack v4 serialises it to JSON (the shapes of its
 * event documentation; default scalars present).
 */
export function chirpstackEventJson(type: ChirpstackOtherEvent, devEui: string, time = Date.now()): string {
  const head = {
    deduplicationId: randomUUID(),
    time: chirpstackTime(time),
    deviceInfo: deviceInfoJson(devEui),
  };
  switch (type) {
    case 'join':
      return chirpstackJoinJson(devEui, time);
    case 'log':
      return chirpstackLogJson(devEui, time);
    case 'ack':
      return JSON.stringify({ ...head, queueItemId: randomUUID(), acknowledged: true, fCntDown: 7 });
    case 'txack': {
      const { deduplicationId: _none, ...rest } = head;
      return JSON.stringify({
        downlinkId: 3162200893,
        ...rest,
        queueItemId: randomUUID(),
        fCntDown: 7,
        gatewayId: '0016c001f153a14c',
        txInfo: {
          frequency: 868100000,
          power: 14,
          modulation: {
            lora: { bandwidth: 125000, spreadingFactor: 7, codeRate: 'CR_4_5', polarizationInversion: true },
          },
          timing: { delay: { delay: '1s' } },
          context: 'EFwMtA==',
        },
      });
    }
    case 'location':
      return JSON.stringify({
        ...head,
        location: {
          latitude: 52.3676,
          longitude: 4.9041,
          altitude: 2.5,
          source: 'GEO_RESOLVER_TDOA',
          accuracy: 12.5,
        },
      });
    case 'integration':
      return JSON.stringify({
        ...head,
        integrationName: 'loracloud',
        eventType: 'DAS_UplinkResponse',
        object: { result: { position_solution: null } },
      });
  }
}

/**
 * The same event with the protobuf encoding, built with @chirpstack/chirpstack-api's classes.
 * The package has no `IntegrationEvent` class: that one is written field by field after
 * integration.proto (1 deduplication_id, 2 time, 3 device_info, 4 integration_name, 5 event_type,
 * 6 object) with google-protobuf's writer and the package's `DeviceInfo`.
 */
export function chirpstackEventProtobuf(
  type: ChirpstackOtherEvent,
  devEui: string,
  time = Date.now(),
): Buffer {
  const at = Timestamp.fromDate(new Date(time));
  switch (type) {
    case 'join': {
      const e = new integration.JoinEvent();
      e.setDeduplicationId(randomUUID());
      e.setTime(at);
      e.setDeviceInfo(deviceInfoPb(devEui));
      e.setDevAddr('00189440');
      e.setRegionConfigId('eu868');
      return Buffer.from(e.serializeBinary());
    }
    case 'ack': {
      const e = new integration.AckEvent();
      e.setDeduplicationId(randomUUID());
      e.setTime(at);
      e.setDeviceInfo(deviceInfoPb(devEui));
      e.setQueueItemId(randomUUID());
      e.setAcknowledged(true);
      e.setFCntDown(7);
      return Buffer.from(e.serializeBinary());
    }
    case 'txack': {
      const e = new integration.TxAckEvent();
      e.setDownlinkId(3162200893);
      e.setTime(at);
      e.setDeviceInfo(deviceInfoPb(devEui));
      e.setQueueItemId(randomUUID());
      e.setFCntDown(7);
      e.setGatewayId('0016c001f153a14c');
      const tx = new gw.DownlinkTxInfo();
      tx.setFrequency(868100000);
      tx.setPower(14);
      const delay = new gw.DelayTimingInfo();
      const second = new Duration();
      second.setSeconds(1);
      delay.setDelay(second);
      const timing = new gw.Timing();
      timing.setDelay(delay);
      tx.setTiming(timing);
      e.setTxInfo(tx);
      return Buffer.from(e.serializeBinary());
    }
    case 'log': {
      const e = new integration.LogEvent();
      e.setTime(at);
      e.setDeviceInfo(deviceInfoPb(devEui));
      e.setLevel(integration.LogLevel.ERROR);
      e.setCode(integration.LogCode.UPLINK_CODEC);
      e.setDescription('js execution error');
      e.getContextMap().set('deduplication_id', randomUUID());
      return Buffer.from(e.serializeBinary());
    }
    case 'location': {
      const e = new integration.LocationEvent();
      e.setDeduplicationId(randomUUID());
      e.setTime(at);
      e.setDeviceInfo(deviceInfoPb(devEui));
      const location = new common.Location();
      location.setLatitude(52.3676);
      location.setLongitude(4.9041);
      location.setAltitude(2.5);
      location.setSource(common.LocationSource.GEO_RESOLVER_TDOA);
      location.setAccuracy(12.5);
      e.setLocation(location);
      return Buffer.from(e.serializeBinary());
    }
    case 'integration': {
      const w = new jspb.BinaryWriter();
      w.writeString(1, randomUUID());
      w.writeBytes(2, at.serializeBinary());
      w.writeBytes(3, deviceInfoPb(devEui).serializeBinary());
      w.writeString(4, 'loracloud');
      w.writeString(5, 'DAS_UplinkResponse');
      w.writeBytes(6, Struct.fromJavaScript({ result: { position_solution: null } }).serializeBinary());
      return Buffer.from(w.getResultBuffer());
    }
  }
}

export interface TtsUplink {
  /** As TTS writes it: upper-case hex; absent for a device registered without one. */
  devEui?: string;
  correlationIds?: string[];
  receivedAt?: number;
  /** Omitted when 0, as TTS does. */
  fCnt?: number;
  fPort?: number;
  data?: Buffer;
  decodedPayload?: Record<string, unknown>;
  rx?: (Reception & { time?: number })[];
}

/** The Things Stack v3 uplink message: empty, zero and false fields left out. */
export function ttsUplinkJson(up: TtsUplink): string {
  const receivedAt = new Date(up.receivedAt ?? Date.now()).toISOString();
  const ids = up.correlationIds ?? [`as:up:01${randomUUID().replace(/-/g, '').slice(0, 24).toUpperCase()}`];
  return JSON.stringify({
    end_device_ids: {
      device_id: `eui-${(up.devEui ?? 'none').toLowerCase()}`,
      application_ids: { application_id: 'cold-chain' },
      ...(up.devEui ? { dev_eui: up.devEui } : {}),
      join_eui: '0000000000000000',
      dev_addr: '260B1234',
    },
    correlation_ids: ids,
    received_at: receivedAt,
    uplink_message: {
      session_key_id: 'AXA50...',
      ...(up.fCnt ? { f_cnt: up.fCnt } : {}),
      ...(up.fPort ? { f_port: up.fPort } : {}),
      ...(up.data && up.data.length > 0 ? { frm_payload: up.data.toString('base64') } : {}),
      ...(up.decodedPayload ? { decoded_payload: up.decodedPayload } : {}),
      rx_metadata: (up.rx ?? (DEFAULT_RX as (Reception & { time?: number })[])).map((r) => ({
        gateway_ids: { gateway_id: 'kitchen-gw', eui: r.gatewayId.toUpperCase() },
        ...(r.time ? { time: new Date(r.time).toISOString() } : {}),
        timestamp: 2463457000,
        rssi: r.rssi,
        channel_rssi: r.rssi,
        snr: r.snr,
        uplink_token: 'ChIKEAoOa2l0Y2hlbi1ndw==',
        channel_index: 2,
      })),
      settings: {
        data_rate: { lora: { bandwidth: 125000, spreading_factor: 7 } },
        coding_rate: '4/5',
        frequency: '868500000',
      },
      received_at: receivedAt,
      consumed_airtime: '0.056576s',
    },
  });
}

/** A `join_accept` message. */
export function ttsJoinAcceptJson(devEui: string): string {
  return JSON.stringify({
    end_device_ids: { device_id: `eui-${devEui.toLowerCase()}`, dev_eui: devEui },
    correlation_ids: [`as:up:01${randomUUID().replace(/-/g, '').slice(0, 24).toUpperCase()}`],
    received_at: new Date().toISOString(),
    join_accept: { session_key_id: 'AXBSH1Pk6Z0G166...', received_at: new Date().toISOString() },
  });
}

/**
 * A ChirpStack v4 HTTP integration delivering `up` events for a few Cayenne LPP sensors to the
 * cloud's webhook, as ChirpStack does: `POST <url>?event=up`, the integration token in the
 * `Authorization` header it lets an operator set, JSON or protobuf.
 */
export class ChirpstackWebhookEmulator {
  private readonly values = new Map<string, () => ClimateValues>();
  private fCnt = 0;

  constructor(
    private readonly options: {
      /** The URL the integration answered, e.g. http://localhost:8080/v1/webhooks/chirpstack */
      url: string;
      token: string;
      devEuis: string[];
      encoding?: 'json' | 'protobuf';
    },
  ) {}

  /** One uplink per device; answers each delivery's status. */
  async round(): Promise<{ devEui: string; status: number; body: string }[]> {
    const out = [];
    for (const devEui of this.options.devEuis) {
      let next = this.values.get(devEui);
      if (!next) this.values.set(devEui, (next = climate(4)));
      const v = next();
      const up: ChirpstackUp = {
        devEui,
        fCnt: this.fCnt++,
        fPort: 2,
        data: cayenneLpp(v.temperature, v.humidity),
        object: {
          temperatureSensor: { '1': Math.round(v.temperature * 10) / 10 },
          humiditySensor: { '2': Math.round(v.humidity * 2) / 2 },
        },
        rx: [{ gatewayId: '0016c001f153a14c', rssi: -90 - Math.round(Math.random() * 20), snr: 7.5 }],
      };
      const protobuf = this.options.encoding === 'protobuf';
      const response = await fetch(`${this.options.url}?event=up`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${this.options.token}`,
          'content-type': protobuf ? 'application/octet-stream' : 'application/json',
        },
        body: protobuf ? chirpstackUpProtobuf(up) : chirpstackUpJson(up),
      });
      out.push({ devEui, status: response.status, body: await response.text() });
    }
    return out;
  }
}
