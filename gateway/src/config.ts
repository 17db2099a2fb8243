import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { X509Certificate } from 'node:crypto';
import YAML from 'yaml';
import { z } from 'zod';
import { PAYLOAD_DECODERS } from '../../shared/lorawan/payload-decoders.ts';
import { DEVICE_ID } from './reading.ts';

/**
 * The gateway's configuration: one YAML file (a commented example ships as
 * hardware/pi/gateway.example.yaml), validated once at boot into a deeply frozen object that is
 * injected everywhere. Relative paths are resolved against the file's own directory. The MQTT bridge
 * bundle (the JSON answer of `POST /v1/bridges`, saved as a file) is read and checked here too, so a
 * bad bundle is a configuration error reported at boot and by `--check`.
 */

const port = z.number().int().min(0).max(65535);
const deviceId = z.string().regex(DEVICE_ID, 'must be 1-128 letters, digits, . _ : - (no / + #)');
const MODELS = [
  'shelly-ht-gen1',
  'shelly-plus-ht',
  'shelly-ht-gen3',
  'shelly-plus-1pm',
  'lorawan-generic',
  'dragino-lht65',
  'elsys-ers',
  'cayenne-lpp',
  'serial-generic',
  'http-generic',
  'mqtt-generic',
] as const;
const model = z.enum(MODELS);

const ShellyHttpSchema = z
  .object({
    enabled: z.boolean().default(true),
    host: z.string().min(1).default('0.0.0.0'),
    port: port.default(8081),
    /** When set, requests must carry `token=<this>` (the cloud URL's token parameter works as is). */
    token: z.string().min(1).optional(),
    /** Per device: its model (third-generation H&Ts report battery in volts). */
    devices: z.record(deviceId, z.object({ model })).default({}),
  })
  .strict();

const ShellyMqttSchema = z
  .object({
    enabled: z.boolean().default(true),
    host: z.string().min(1).default('0.0.0.0'),
    port: port.default(1883),
    /** When both are set, devices must log in with them. */
    username: z.string().min(1).optional(),
    password: z.string().min(1).optional(),
  })
  .strict()
  .refine((c) => (c.username === undefined) === (c.password === undefined), {
    message: 'set both username and password, or neither',
  });

/**
 * A wait in milliseconds: at least 10 (a smaller one spins), at most a day (Node's timers take at
 * most 2^31 - 1 ms and fire at once past it).
 */
const delayMs = z.number().int().min(10).max(86_400_000);

const SerialPortSchema = z
  .object({
    path: z.string().min(1),
    /** The device the lines belong to (a `device=` or `id=` pair in a key=value line overrides it). */
    device: deviceId,
    baud_rate: z.number().int().positive().default(9600),
    format: z.enum(['kv', 'vaisala']).default('kv'),
    model: model.default('serial-generic'),
    /** A line written to the port on `cmd/identify` (for sensors that blink on a command). */
    identify_command: z.string().min(1).optional(),
    reopen_min_ms: delayMs.default(500),
    reopen_max_ms: delayMs.default(30_000),
  })
  .strict();

const SerialSchema = z
  .object({
    enabled: z.boolean().default(true),
    ports: z.array(SerialPortSchema).min(1),
  })
  .strict();

const ChirpstackDeviceSchema = z
  .object({
    model: model.default('lorawan-generic'),
    /** Decodes `data` when the network server sent no decoded `object`; `none`: the model's decoder. */
    decoder: z.enum(PAYLOAD_DECODERS).default('none'),
    /** A downlink sent on `cmd/identify` (device-specific; most sensors have none). */
    identify: z
      .object({ f_port: z.number().int().min(1).max(223), data_hex: z.string().regex(/^([0-9a-fA-F]{2})+$/) })
      .strict()
      .optional(),
  })
  .strict();

const ChirpstackSchema = z
  .object({
    enabled: z.boolean().default(true),
    url: z.string().regex(/^mqtts?:\/\//, 'must be mqtt://host:port or mqtts://host:port'),
    username: z.string().min(1).optional(),
    password: z.string().min(1).optional(),
    /** A CA file for an mqtts:// ChirpStack broker with a private CA. */
    ca_file: z.string().min(1).optional(),
    /** The application's UUID, or `+` for every application the broker carries. */
    application_id: z
      .string()
      .regex(/^(\+|[0-9a-fA-F-]{1,64})$/)
      .default('+'),
    /** A fixed client id with a persistent session, so the broker keeps uplinks while the gateway restarts. */
    client_id: z.string().min(1).max(64).optional(),
    encoding: z.enum(['auto', 'json', 'protobuf']).default('auto'),
    /** Reconnect backoff to the broker: the first wait's ceiling, doubled per attempt up to the max. */
    reconnect_min_ms: delayMs.default(1_000),
    reconnect_max_ms: delayMs.default(60_000),
    /** Devices by DevEUI (lower-case hex). */
    devices: z
      .record(
        z.string().regex(/^[0-9a-f]{16}$/, 'a DevEUI is 16 lower-case hex digits'),
        ChirpstackDeviceSchema,
      )
      .default({}),
    default_decoder: z.enum(PAYLOAD_DECODERS).default('none'),
  })
  .strict();

/** The configuration file (hardware/pi/gateway.example.yaml shows every key). */
export const FileSchema = z
  .object({
    gateway: z
      .object({
        /** The gateway's own device id in the cloud (model gateway-pi); also its MQTT client id. */
        id: deviceId.optional(),
        data_dir: z.string().min(1).default('/var/lib/sensor-gateway'),
        log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
        status_interval_s: z.number().min(1).max(86_400).default(60),
      })
      .strict()
      .default({ data_dir: '/var/lib/sensor-gateway', log_level: 'info', status_interval_s: 60 }),
    uplink: z
      .object({
        /** The JSON answer of POST /v1/bridges, saved as a file. */
        bundle: z.string().min(1),
        /** Overrides the bundle's mqtt_url, e.g. mqtts://mqtt.example.com:8883. */
        url: z.string().min(1).optional(),
        inflight: z.number().int().min(1).max(65535).default(100),
        keepalive_s: z.number().int().min(5).max(3600).default(30),
        connect_timeout_ms: delayMs.default(10_000),
        reconnect_min_ms: delayMs.default(1_000),
        reconnect_max_ms: delayMs.default(60_000),
      })
      .strict(),
    /** The read-only status page on the LAN (status-page.ts), for an installer without a shell. */
    status_page: z
      .object({
        enabled: z.boolean().default(true),
        host: z.string().min(1).default('0.0.0.0'),
        port: z.number().int().min(0).max(65535).default(8080),
      })
      .strict()
      .default({ enabled: true, host: '0.0.0.0', port: 8080 }),
    buffer: z
      .object({
        /** Readings held at most; when full, new readings are refused and old ones kept. */
        capacity: z.number().int().positive().default(5_000_000),
      })
      .strict()
      .default({ capacity: 5_000_000 }),
    collectors: z
      .object({
        shelly_http: ShellyHttpSchema.optional(),
        shelly_mqtt: ShellyMqttSchema.optional(),
        serial: SerialSchema.optional(),
        chirpstack: ChirpstackSchema.optional(),
      })
      .strict()
      .default({}),
  })
  .strict();

const BundleSchema = z.object({
  id: z.string().optional(),
  topic_root: z.string().regex(/^service\/[^/+#]+\/$/, 'must be service/<account_id>/'),
  mqtt_url: z.string().min(1),
  cert_pem: z.string().includes('BEGIN CERTIFICATE'),
  key_pem: z.string().includes('PRIVATE KEY'),
  ca_pem: z.string().includes('BEGIN CERTIFICATE'),
  expires_at: z.string().optional(),
});

export type ShellyHttpConfig = z.infer<typeof ShellyHttpSchema>;
export type ShellyMqttConfig = z.infer<typeof ShellyMqttSchema>;
export type SerialPortConfig = z.infer<typeof SerialPortSchema>;
export type SerialConfig = z.infer<typeof SerialSchema>;
export type ChirpstackConfig = z.infer<typeof ChirpstackSchema>;
export type ChirpstackDeviceConfig = z.infer<typeof ChirpstackDeviceSchema>;
type FileConfig = z.infer<typeof FileSchema>;

export interface UplinkConfig {
  readonly url: string;
  readonly topicRoot: string;
  readonly accountId: string;
  readonly certPem: string;
  readonly keyPem: string;
  readonly caPem: string;
  /** The client certificate's subject CN and expiry, for --check. */
  readonly certSubject: string;
  readonly certExpires: string;
  readonly inflight: number;
  readonly keepaliveSeconds: number;
  readonly connectTimeoutMs: number;
  readonly reconnectMinMs: number;
  readonly reconnectMaxMs: number;
}

export interface GatewayConfig {
  readonly file: string;
  readonly gatewayId: string;
  readonly dataDir: string;
  readonly logLevel: string;
  readonly statusIntervalMs: number;
  readonly uplink: UplinkConfig;
  readonly bufferCapacity: number;
  /** Where the status page listens; null when disabled. */
  readonly statusPage: { readonly host: string; readonly port: number } | null;
  readonly collectors: Readonly<FileConfig['collectors']>;
}

export class ConfigError extends Error {}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

function describe(issue: z.core.$ZodIssue): string {
  return `${issue.path.length ? issue.path.join('.') : '(root)'}: ${issue.message}`;
}

/** `mqtts://host:port` from `host`, `host:port` or a full URL (the bridge's port is 8883). */
export function normaliseMqttUrl(text: string): string {
  const withScheme = /^[a-z]+:\/\//.test(text) ? text : `mqtts://${text}`;
  const url = new URL(withScheme);
  if (url.protocol !== 'mqtts:') throw new ConfigError(`the uplink needs mqtts:// (mutual TLS), got ${text}`);
  if (!url.port) url.port = '8883';
  return `mqtts://${url.host}`;
}

/** Reads, validates and freezes the configuration file; throws ConfigError naming what is wrong. */
export function loadConfig(file: string): GatewayConfig {
  const absolute = path.resolve(file);
  let text: string;
  try {
    text = fs.readFileSync(absolute, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read ${absolute}: ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = YAML.parse(text);
  } catch (err) {
    throw new ConfigError(`${absolute} is not valid YAML: ${(err as Error).message}`);
  }
  const parsed = FileSchema.safeParse(raw ?? {});
  if (!parsed.success) {
    throw new ConfigError(`${absolute}: ${parsed.error.issues.map(describe).join('; ')}`);
  }
  const c = parsed.data;
  const base = path.dirname(absolute);
  const resolve = (p: string) => path.resolve(base, p);

  const bundleFile = resolve(c.uplink.bundle);
  let bundleRaw: unknown;
  try {
    bundleRaw = JSON.parse(fs.readFileSync(bundleFile, 'utf8'));
  } catch (err) {
    throw new ConfigError(`uplink.bundle: cannot read ${bundleFile} as JSON: ${(err as Error).message}`);
  }
  const bundle = BundleSchema.safeParse(bundleRaw);
  if (!bundle.success) {
    throw new ConfigError(`uplink.bundle ${bundleFile}: ${bundle.error.issues.map(describe).join('; ')}`);
  }
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(bundle.data.cert_pem);
  } catch (err) {
    throw new ConfigError(`uplink.bundle: cert_pem is not a certificate: ${(err as Error).message}`);
  }
  const accountId = bundle.data.topic_root.split('/')[1]!;

  const collectors = { ...c.collectors };
  if (collectors.serial) {
    collectors.serial = {
      ...collectors.serial,
      ports: collectors.serial.ports.map((p) => ({ ...p, path: resolve(p.path) })),
    };
    const paths = collectors.serial.ports.map((p) => p.path);
    if (new Set(paths).size !== paths.length)
      throw new ConfigError('collectors.serial.ports: a path appears twice');
  }
  if (collectors.chirpstack?.ca_file) {
    collectors.chirpstack = { ...collectors.chirpstack, ca_file: resolve(collectors.chirpstack.ca_file) };
  }
  const fallbackId = `gw-${os.hostname().replace(/[^A-Za-z0-9._:-]/g, '-')}`.slice(0, 128);

  return deepFreeze({
    file: absolute,
    gatewayId: c.gateway.id ?? fallbackId,
    dataDir: resolve(c.gateway.data_dir),
    logLevel: c.gateway.log_level,
    statusIntervalMs: c.gateway.status_interval_s * 1000,
    uplink: {
      url: normaliseMqttUrl(c.uplink.url ?? bundle.data.mqtt_url),
      topicRoot: bundle.data.topic_root,
      accountId,
      certPem: bundle.data.cert_pem,
      keyPem: bundle.data.key_pem,
      caPem: bundle.data.ca_pem,
      certSubject: cert.subject.replace(/\n/g, ', '),
      certExpires: new Date(cert.validTo).toISOString(),
      inflight: c.uplink.inflight,
      keepaliveSeconds: c.uplink.keepalive_s,
      connectTimeoutMs: c.uplink.connect_timeout_ms,
      reconnectMinMs: c.uplink.reconnect_min_ms,
      reconnectMaxMs: Math.max(c.uplink.reconnect_max_ms, c.uplink.reconnect_min_ms),
    },
    bufferCapacity: c.buffer.capacity,
    statusPage: c.status_page.enabled ? { host: c.status_page.host, port: c.status_page.port } : null,
    collectors,
  });
}
