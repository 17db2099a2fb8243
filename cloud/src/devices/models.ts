import { Unprocessable } from '../errors.ts';
/**
 * The supported device models (docs/api/resources.md). `identify` says whether `cmd/identify` (or an
 * equivalent downlink) makes the device blink.
 */
export type IngestUrlKind = 'https_post' | 'shelly_get' | 'mqtt' | 'lorawan';

export interface DeviceModel {
  model: string;
  /** What a person calls it, as the dashboard shows it. */
  name: string;
  vendor: string;
  ingest_url_kind: IngestUrlKind;
  identify: boolean;
  /** Third-generation Shelly devices report battery in volts (docs/api/ingest.md). */
  batteryInVolts?: boolean;
}

export const DEVICE_MODELS: readonly DeviceModel[] = [
  {
    model: 'shelly-ht-gen1',
    name: 'Shelly H&T (1st generation)',
    vendor: 'Shelly',
    ingest_url_kind: 'shelly_get',
    identify: false,
  },
  // A battery H&T sleeps between reports and has no indicator the Gen2 RPC can drive.
  {
    model: 'shelly-plus-ht',
    name: 'Shelly Plus H&T',
    vendor: 'Shelly',
    ingest_url_kind: 'mqtt',
    identify: false,
  },
  {
    model: 'shelly-ht-gen3',
    name: 'Shelly H&T Gen3',
    vendor: 'Shelly',
    ingest_url_kind: 'shelly_get',
    identify: false,
    batteryInVolts: true,
  },
  {
    model: 'shelly-plus-1pm',
    name: 'Shelly Plus 1PM',
    vendor: 'Shelly',
    ingest_url_kind: 'mqtt',
    identify: true,
  },
  {
    model: 'lorawan-generic',
    name: 'LoRaWAN sensor (any)',
    vendor: 'LoRaWAN',
    ingest_url_kind: 'lorawan',
    identify: false,
  },
  {
    model: 'dragino-lht65',
    name: 'Dragino LHT65',
    vendor: 'Dragino',
    ingest_url_kind: 'lorawan',
    identify: false,
  },
  { model: 'elsys-ers', name: 'Elsys ERS', vendor: 'Elsys', ingest_url_kind: 'lorawan', identify: false },
  {
    model: 'cayenne-lpp',
    name: 'Sensor sending Cayenne LPP',
    vendor: 'myDevices',
    ingest_url_kind: 'lorawan',
    identify: false,
  },
  {
    model: 'serial-generic',
    name: 'Serial sensor on a gateway',
    vendor: 'Generic',
    ingest_url_kind: 'mqtt',
    identify: false,
  },
  {
    model: 'http-generic',
    name: 'Any device posting over HTTPS',
    vendor: 'Generic',
    ingest_url_kind: 'https_post',
    identify: false,
  },
  {
    model: 'mqtt-generic',
    name: 'Any device publishing over MQTT',
    vendor: 'Generic',
    ingest_url_kind: 'mqtt',
    identify: true,
  },
  {
    model: 'gateway-pi',
    name: 'Raspberry Pi gateway',
    vendor: 'Raspberry Pi',
    ingest_url_kind: 'mqtt',
    identify: true,
  },
];

const BY_NAME = new Map(DEVICE_MODELS.map((m) => [m.model, m]));

export function findModel(model: string): DeviceModel | undefined {
  return BY_NAME.get(model);
}

/** The model named, or 422 `unknown_model`. */
export function requireModel(model: string): DeviceModel {
  const found = BY_NAME.get(model);
  if (!found) {
    throw new Unprocessable(
      'unknown_model',
      `model ${JSON.stringify(model)} is not supported; see GET /v1/models`,
    );
  }
  return found;
}

export function modelOf(model: string): DeviceModel {
  const found = BY_NAME.get(model);
  if (!found) throw new Error(`unknown model ${model}`);
  return found;
}
