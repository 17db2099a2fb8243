import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import path from 'node:path';
import type { ShellyHttpCollector } from '../../gateway/src/collectors/shelly-http/shelly-http.collector.ts';
import type { ShellyMqttCollector } from '../../gateway/src/collectors/shelly-mqtt/shelly-mqtt.collector.ts';
import { GATEWAY_VERSION } from '../../gateway/src/gateway.ts';
import { ChirpstackEmulator } from '../../hardware/emulators/chirpstack.ts';
import { SerialSensorEmulator } from '../../hardware/emulators/serial-sensor.ts';
import { ShellyHtGen1Emulator } from '../../hardware/emulators/shelly-ht-gen1.ts';
import { ShellyPlusHtEmulator } from '../../hardware/emulators/shelly-plus-ht.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../helpers/cloud.ts';
import { eventually } from '../helpers/eventually.ts';
import { createSite } from '../helpers/fixtures.ts';
import { createBridge } from '../helpers/mqtt.ts';
import { channelPoints, deviceByLocalId, saveBundle } from './helpers/cloud-reads.ts';
import { startTestGateway, tempDir, until, writeGatewayConfig, type TestGateway } from './helpers/gateway.ts';

/**
 * End to end, every hop real: each emulator (hardware/emulators) talks to the gateway over its own
 * protocol (HTTP, MQTT to the gateway's aedes, a socat pseudo-terminal, a ChirpStack MQTT
 * integration), the gateway buffers in SQLite and uplinks over mutual-TLS MQTT 5 to the real cloud
 * with the bundle of POST /v1/bridges, and the readings are read back through
 * GET /v1/channels/{id}/measurements.
 */

let t: TestCloud;
let user: SignedIn;
let siteId: string;
let gw: TestGateway;
let dir: string;
let chirpstack: ChirpstackEmulator;
let chirpstackUrl: string;
let serial: SerialSensorEmulator;
const DEV_EUI = 'a84041000181c0de';

beforeAll(async () => {
  t = await startTestCloud({ mqtt: true, env: { RATE_LIMIT_MODE: 'warn' } });
  user = await signUp(t, 'installer@example.com');
  siteId = (await createSite(t, user.token, { name: 'Cold room', vertical: 'food_service' })).id;
  const bundle = await createBridge(t, user.token, siteId, 'Pi in the cold room');
  dir = tempDir('gw-e2e-');
  chirpstack = new ChirpstackEmulator({ devEui: DEV_EUI, encoding: 'json' });
  chirpstackUrl = await chirpstack.serveBroker();
  await chirpstack.connect(chirpstackUrl);
  serial = new SerialSensorEmulator({
    sensorPath: path.join(dir, 'sensor-end'),
    gatewayPath: path.join(dir, 'ttyUSB0'),
  });
  await serial.plug();
  const file = writeGatewayConfig(dir, {
    bundle: (f) => saveBundle(f, t, bundle),
    gatewayId: 'gw-coldroom',
    collectors: {
      shelly_http: { host: '127.0.0.1', port: 0 },
      shelly_mqtt: { host: '127.0.0.1', port: 0 },
      serial: {
        ports: [
          {
            path: serial.gatewayPath,
            device: 'probe-1',
            format: 'kv',
            reopen_min_ms: 50,
            reopen_max_ms: 200,
          },
        ],
      },
      chirpstack: {
        url: chirpstackUrl,
        client_id: 'gw-coldroom-chirpstack',
        devices: { [DEV_EUI]: { model: 'cayenne-lpp' } },
      },
    },
  });
  gw = await startTestGateway(file);
  await until(() => gw.gateway.status.snapshot().uplink.state === 'connected', 'the uplink');
  await until(() => gw.gateway.status.snapshot().collectors.chirpstack!.state === 'connected', 'ChirpStack');
  await until(() => gw.gateway.status.snapshot().collectors.serial!.state === 'open', 'the serial port');
}, 60_000);

afterAll(async () => {
  await gw?.stop();
  await serial?.stop();
  await chirpstack?.stop();
  await t?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const points = (localId: string, kind: string, label: string | null = null) =>
  channelPoints(t, user.token, siteId, localId, kind, label);

describe('gateway to cloud, every hop real', () => {
  it('the gateway shows up as a device of the bridge site, online, with its model', async () => {
    // Its info creates it (with the model), then its retained online state follows.
    const device = await eventually(async () => {
      const d = await deviceByLocalId(t, user.token, siteId, 'gw-coldroom');
      return d?.online === true ? d : null;
    }, 'the gateway device, online');
    expect(device.model).toBe('gateway-pi');
    expect(device.fw_version).toBe(GATEWAY_VERSION);
  });

  it('Shelly H&T Gen1 URL actions reach the cloud with their values', async () => {
    const http = gw.gateway.collector<ShellyHttpCollector>('shelly-http');
    const h = new ShellyHtGen1Emulator({ url: `http://127.0.0.1:${http.port}/`, id: 'shellyht-EE45E9' });
    for (const temp of [3.5, 3.75, 4]) expect(await h.report({ temperature: temp, humidity: 60 })).toBe(200);
    const temps = await eventually(async () => {
      const p = await points('shellyht-EE45E9', 'temperature');
      return p.length === 3 ? p : null;
    }, 'three temperatures');
    expect(temps.map((p) => p.value)).toEqual([3.5, 3.75, 4]);
    expect((await points('shellyht-EE45E9', 'humidity')).map((p) => p.value)).toEqual([60, 60, 60]);
    const device = await deviceByLocalId(t, user.token, siteId, 'shellyht-EE45E9');
    expect(device).toMatchObject({ model: 'shelly-ht-gen1', fw_version: 'v1.14.0-gcb84623' });
  });

  it('Shelly Plus H&T over the local broker: values with the device time, info, and its last-will', async () => {
    const broker = gw.gateway.collector<ShellyMqttCollector>('shelly-mqtt');
    const plus = new ShellyPlusHtEmulator({
      brokerUrl: `mqtt://127.0.0.1:${broker.port}`,
      id: 'shellyplusht-08b61fcb7f3c',
    });
    await plus.connect();
    const deviceTimes = [Date.now() / 1000 - 120, Date.now() / 1000 - 60];
    await plus.report({ temperature: 21.5, humidity: 40, battery: 80, ts: deviceTimes[0] });
    await plus.report({ temperature: 21.75, humidity: 41, battery: 80, ts: deviceTimes[1] });
    const temps = await eventually(async () => {
      const p = await points('shellyplusht-08b61fcb7f3c', 'temperature');
      return p.length === 2 ? p : null;
    }, 'two temperatures');
    expect(temps.map((p) => p.value)).toEqual([21.5, 21.75]);
    // The reading time is the device's own (NotifyStatus params.ts), not the upload time.
    expect(temps.map((p) => Date.parse(p.ts) / 1000)).toEqual(
      deviceTimes.map((s) => Math.round(s * 100) / 100),
    );
    expect((await points('shellyplusht-08b61fcb7f3c', 'battery')).map((p) => p.value)).toEqual([80, 80]);
    const info = await eventually(async () => {
      const d = await deviceByLocalId(t, user.token, siteId, 'shellyplusht-08b61fcb7f3c');
      return d?.fw_version === '1.0.8' ? d : null;
    }, 'the firmware from Shelly.GetDeviceInfo');
    expect(info).toMatchObject({ model: 'shelly-plus-ht', online: true });

    // The Plus H&T cannot blink: the cloud says so without sending cmd/identify to the gateway.
    const identify = await t.http.post(`/v1/devices/${info.id}/identify`, {}, { token: user.token });
    expect(identify.status).toBe(202);
    expect(identify.json.status).toBe('unsupported');

    plus.crash();
    await eventually(async () => {
      const d = await deviceByLocalId(t, user.token, siteId, 'shellyplusht-08b61fcb7f3c');
      return d?.online === false;
    }, 'the device to go offline through its last-will');
  });

  it('a serial sensor on a pseudo-terminal reaches the cloud', async () => {
    for (const temp of [5.5, 5.25]) await serial.send({ temperature: temp, humidity: 70, battery: 95 });
    const temps = await eventually(async () => {
      const p = await points('probe-1', 'temperature');
      return p.length === 2 ? p : null;
    }, 'two serial temperatures');
    expect(temps.map((p) => p.value)).toEqual([5.5, 5.25]);
    expect((await deviceByLocalId(t, user.token, siteId, 'probe-1'))!.model).toBe('serial-generic');
  });

  it('ChirpStack uplinks (JSON and protobuf, with or without a decoded object) reach the cloud with the network time and RSSI', async () => {
    const base = Date.now() - 300_000;
    await chirpstack.uplink({ temperature: -19.5, humidity: 55, time: base, rssi: -101 });
    const proto = new ChirpstackEmulator({
      devEui: DEV_EUI,
      encoding: 'protobuf',
      applicationId: chirpstack.applicationId,
    });
    // A device profile without a codec: the payload is decoded with the model's decoder (shared/lorawan/).
    const bare = new ChirpstackEmulator({
      devEui: DEV_EUI,
      encoding: 'protobuf',
      applicationId: chirpstack.applicationId,
      withObject: false,
    });
    await proto.connect(chirpstackUrl);
    await bare.connect(chirpstackUrl);
    try {
      await proto.uplink({ temperature: -18.5, humidity: 56, time: base + 60_000, rssi: -99 });
      await bare.uplink({ temperature: -17.5, humidity: 57, time: base + 120_000, rssi: -98 });
    } finally {
      await proto.stop();
      await bare.stop();
    }
    const temps = await eventually(async () => {
      const p = await points(DEV_EUI, 'temperature', '1');
      return p.length === 3 ? p : null;
    }, 'three LoRaWAN temperatures');
    expect(temps).toEqual([
      { ts: new Date(base).toISOString().replace('Z', '000Z'), value: -19.5 },
      { ts: new Date(base + 60_000).toISOString().replace('Z', '000Z'), value: -18.5 },
      { ts: new Date(base + 120_000).toISOString().replace('Z', '000Z'), value: -17.5 },
    ]);
    expect((await points(DEV_EUI, 'humidity', '2')).map((p) => p.value)).toEqual([55, 56, 57]);
    expect((await points(DEV_EUI, 'signal')).map((p) => p.value)).toEqual([-101, -99, -98]);
    expect((await deviceByLocalId(t, user.token, siteId, DEV_EUI))!.model).toBe('cayenne-lpp');
  });

  it('the gateway status counts what each collector accepted and the buffer is drained', async () => {
    await until(() => gw.gateway.status.snapshot().buffer.depth === 0, 'the buffer to drain');
    const status = gw.gateway.status.snapshot();
    expect(status.uplink.rejected).toBe(0);
    for (const name of ['shelly-http', 'shelly-mqtt', 'serial', 'chirpstack']) {
      expect(status.collectors[name]!.accepted).toBeGreaterThan(0);
    }
  });
});
