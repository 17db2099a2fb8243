import { validateMeasurement, type ValidMeasurement } from '../../../../shared/ingest.ts';

/**
 * What a Shelly second- or third-generation device publishes on its local broker (reference/
 * protocols.md, "Gen2+ MQTT"), turned into readings. The topic prefix defaults to the device id
 * (`shellyplusht-<mac>`, `shellyhtg3-<mac>`), which becomes the reading's device.
 *
 * - `<prefix>/status/temperature:0` `{"id":0,"tC":20.1,"tF":68.3}`, `status/humidity:0` `{"rh":42.2}`,
 *   `status/devicepower:0` `{"battery":{"V":5.9,"percent":78}}` (status_ntf): no device time.
 * - `<prefix>/events/rpc` JSON-RPC `NotifyStatus` / `NotifyFullStatus` (rpc_ntf): the same
 *   components under `params`, with the device's own time `params.ts` (seconds, fractional).
 * - `<prefix>/online` `true` / `false` (the device's last-will is `false`).
 * - First generation: `shellies/<id>/sensor/temperature|humidity|battery` and `shellies/<id>/online`.
 */
export type ShellyMessage =
  | {
      kind: 'reading';
      device: string;
      ts: number | null;
      measurements: ValidMeasurement[];
      viaRpc: boolean;
      /** The topic prefix it came under (a NotifyStatus names its device by `src`, which may differ). */
      prefix: string;
    }
  | { kind: 'online'; device: string; online: boolean }
  | { kind: 'rpc-response'; device: string; id: unknown; result: Record<string, unknown> }
  | { kind: 'ignored'; why: string };

export class ShellyPayloadError extends Error {}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `temperature:0` → null label, `temperature:101` → label `101` (add-on probes). */
function labelOf(component: string): string | null {
  const id = component.slice(component.indexOf(':') + 1);
  return id === '0' ? null : id;
}

/** Measurements of one component status object; none when the component carries no reading. */
export function componentMeasurements(component: string, status: unknown): ValidMeasurement[] {
  if (!isObject(status)) return [];
  const type = component.slice(0, component.indexOf(':'));
  const label = labelOf(component);
  const one = (kind: string, value: unknown, unit?: string): ValidMeasurement[] =>
    typeof value === 'number'
      ? [
          validateMeasurement(
            { type: kind, value, ...(label ? { label } : {}), ...(unit ? { unit } : {}) },
            component,
          ),
        ]
      : [];
  switch (type) {
    case 'temperature':
      return one('temperature', status.tC);
    case 'humidity':
      return one('humidity', status.rh);
    case 'devicepower': {
      const battery = status.battery;
      if (!isObject(battery)) return [];
      if (typeof battery.percent === 'number') return one('battery', battery.percent);
      return one('battery', battery.V, 'V');
    }
    default:
      return [];
  }
}

function parseJson(payload: Buffer): unknown {
  try {
    return JSON.parse(payload.toString('utf8'));
  } catch {
    throw new ShellyPayloadError('payload is not JSON');
  }
}

/** Reads one published message; throws ShellyPayloadError (or IngestValidationError) when it is malformed. */
export function parseShellyMessage(topic: string, payload: Buffer, rpcSource: string): ShellyMessage {
  const parts = topic.split('/');
  if (parts[0] === 'shellies' && parts.length >= 3) return parseGen1(parts, payload);
  const device = parts[0]!;
  if (parts.length === 2 && parts[1] === 'online') {
    const text = payload.toString('utf8').trim();
    if (text !== 'true' && text !== 'false')
      throw new ShellyPayloadError(`online must be true or false, got ${text}`);
    return { kind: 'online', device, online: text === 'true' };
  }
  if (parts.length === 3 && parts[1] === 'status') {
    const measurements = componentMeasurements(parts[2]!, parseJson(payload));
    if (measurements.length === 0) return { kind: 'ignored', why: `no reading in ${parts[2]}` };
    return { kind: 'reading', device, ts: null, measurements, viaRpc: false, prefix: device };
  }
  if (parts.length === 3 && parts[1] === 'events' && parts[2] === 'rpc') {
    const frame = parseJson(payload);
    if (!isObject(frame)) throw new ShellyPayloadError('an RPC frame is a JSON object');
    if (frame.method !== 'NotifyStatus' && frame.method !== 'NotifyFullStatus') {
      return { kind: 'ignored', why: `RPC ${String(frame.method)}` };
    }
    const params = frame.params;
    if (!isObject(params)) throw new ShellyPayloadError('NotifyStatus without params');
    const from = typeof frame.src === 'string' && frame.src !== '' ? frame.src : device;
    const measurements: ValidMeasurement[] = [];
    for (const [component, status] of Object.entries(params)) {
      if (component.includes(':')) measurements.push(...componentMeasurements(component, status));
    }
    if (measurements.length === 0) return { kind: 'ignored', why: 'notification without readings' };
    const ts =
      typeof params.ts === 'number' && Number.isFinite(params.ts) ? Math.round(params.ts * 1e6) : null;
    return { kind: 'reading', device: from, ts, measurements, viaRpc: true, prefix: device };
  }
  // An answer to our own RPC request (`<rpcSource>/rpc`), e.g. Shelly.GetDeviceInfo.
  if (topic === `${rpcSource}/rpc`) {
    const frame = parseJson(payload);
    if (!isObject(frame) || typeof frame.src !== 'string' || !isObject(frame.result)) {
      return { kind: 'ignored', why: 'RPC answer without result' };
    }
    return { kind: 'rpc-response', device: frame.src, id: frame.id, result: frame.result };
  }
  return { kind: 'ignored', why: `topic ${topic}` };
}

function parseGen1(parts: string[], payload: Buffer): ShellyMessage {
  const device = parts[1]!;
  const text = payload.toString('utf8').trim();
  if (parts.length === 3 && parts[2] === 'online') return { kind: 'online', device, online: text === 'true' };
  if (parts.length === 4 && parts[2] === 'sensor') {
    const kind = { temperature: 'temperature', humidity: 'humidity', battery: 'battery' }[parts[3]!];
    if (!kind) return { kind: 'ignored', why: `sensor/${parts[3]}` };
    const value = Number(text);
    if (text === '' || !Number.isFinite(value))
      throw new ShellyPayloadError(`${parts[3]} is not a number: ${text}`);
    return {
      kind: 'reading',
      device,
      ts: null,
      measurements: [validateMeasurement({ type: kind, value }, parts[3]!)],
      viaRpc: false,
      prefix: device,
    };
  }
  return { kind: 'ignored', why: `topic ${parts.join('/')}` };
}

/** The cloud model of a Gen2+ device, from its RPC `app` name or its topic prefix. */
export function shellyModel(device: string, app?: unknown): string {
  const byApp: Record<string, string> = {
    PlusHT: 'shelly-plus-ht',
    HTG3: 'shelly-ht-gen3',
    Plus1PM: 'shelly-plus-1pm',
  };
  if (typeof app === 'string' && byApp[app]) return byApp[app];
  if (device.startsWith('shellyplusht-')) return 'shelly-plus-ht';
  if (device.startsWith('shellyhtg3-')) return 'shelly-ht-gen3';
  if (device.startsWith('shellyplus1pm-')) return 'shelly-plus-1pm';
  if (device.startsWith('shellyht-')) return 'shelly-ht-gen1';
  return 'mqtt-generic';
}
