import type { SensorRef } from './ingest.types.ts';

const SENSOR_CACHE_LIMIT = 100_000;

/** A channel's key within its device: (kind, label). */
export function channelKey(kind: string, labelKey: string): string {
  return labelKey === '' ? kind : `${kind}\u0000${labelKey}`;
}

/**
 * Channels ingest has seen committed, by device, then by (kind, label): a request finds its
 * device's map once. Emptied whole when it reaches its limit (a miss only costs a lookup).
 */
export class ChannelCache {
  private readonly byDevice = new Map<string, Map<string, SensorRef>>();
  private size = 0;

  constructor(private readonly limit = SENSOR_CACHE_LIMIT) {}

  device(deviceId: string): Map<string, SensorRef> | undefined {
    return this.byDevice.get(deviceId);
  }

  add(s: SensorRef): void {
    if (this.size >= this.limit) {
      this.byDevice.clear();
      this.size = 0;
    }
    let channels = this.byDevice.get(s.device_id);
    if (!channels) this.byDevice.set(s.device_id, (channels = new Map<string, SensorRef>()));
    if (!channels.has(channelKey(s.kind, s.label_key))) this.size++;
    channels.set(channelKey(s.kind, s.label_key), s);
  }
}
