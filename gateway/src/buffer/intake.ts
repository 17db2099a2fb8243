import { EARLIEST_TS_MICROS, MAX_FUTURE_MICROS, MAX_MEASUREMENTS } from '../../../shared/ingest.ts';
import { DEFAULT_UNITS } from '../../../shared/kinds.ts';
import { formatSeconds } from '../../../shared/time.ts';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import {
  DEVICE_ID,
  ReadingRefused,
  unsetClock,
  type DeviceInfo,
  type DeviceState,
  type Reading,
  type ReadingSink,
} from '../reading.ts';
import type { ReadingQueue } from './reading-queue.ts';

/** A step of the clock back larger than this is followed (see `timeOf`). */
const CLOCK_STEP_BACK_MICROS = 1_000_000;

/**
 * The one door into the buffer for every collector. It checks what the cloud would check (device id
 * usable as a topic segment, 1..32 measurements, a plausible time), stamps readings that carry no
 * time of their own with the gateway's receive time, and queues them durably.
 *
 * Receive times are kept strictly increasing per device: two readings of one device stamped in the
 * same microsecond would otherwise collapse into one row under the cloud's dedup on (device, ts,
 * channel).
 */
export class Intake implements ReadingSink {
  private readonly lastStamp = new Map<string, number>();
  private readonly lastInfo = new Map<string, string>();
  /** Readings whose device time was implausible and that were stamped with the receive time. */
  clockFallbacks = 0;

  constructor(private readonly deps: { queue: ReadingQueue; clock: Clock; log: Logger }) {}

  accept(reading: Reading): Promise<void> {
    const { device, measurements } = reading;
    const now = this.deps.clock.nowMicros();
    const unset = unsetClock(now);
    if (unset) return Promise.reject(unset);
    if (!DEVICE_ID.test(device)) {
      return Promise.reject(
        new ReadingRefused('invalid', `device ${JSON.stringify(device)} is not a usable device id`),
      );
    }
    if (measurements.length === 0) {
      return Promise.reject(new ReadingRefused('invalid', 'a reading needs at least one measurement'));
    }
    const ts = this.timeOf(device, reading.ts, now);
    const wire = measurements.map((m) => {
      const w: { type: string; value: number; label?: string; unit?: string } = {
        type: m.kind,
        value: m.value,
      };
      if (m.label !== null) w.label = m.label;
      if (m.unit !== DEFAULT_UNITS[m.kind]) w.unit = m.unit;
      return w;
    });
    const appends: Promise<void>[] = [];
    for (let i = 0; i < wire.length; i += MAX_MEASUREMENTS) {
      const body = JSON.stringify(wire.slice(i, i + MAX_MEASUREMENTS));
      appends.push(this.deps.queue.append({ device, kind: 'reading', ts, body }));
    }
    return appends.length === 1 ? appends[0]! : Promise.all(appends).then(() => undefined);
  }

  deviceState(state: DeviceState): Promise<void> {
    if (!DEVICE_ID.test(state.device)) {
      return Promise.reject(
        new ReadingRefused('invalid', `device ${JSON.stringify(state.device)} is not usable`),
      );
    }
    const now = this.deps.clock.nowMicros();
    const unset = unsetClock(now);
    if (unset) return Promise.reject(unset);
    const payload: Record<string, string> = { status: state.status };
    if (state.status === 'offline') payload.reason = state.reason ?? 'connection lost';
    payload.at = formatSeconds(state.at);
    return this.deps.queue.append({
      device: state.device,
      kind: 'state',
      ts: state.at,
      body: JSON.stringify(payload),
    });
  }

  /** Queues a device's info when it differs from what was last forwarded in this run. */
  deviceInfo(info: DeviceInfo): Promise<void> {
    if (!DEVICE_ID.test(info.device)) {
      return Promise.reject(
        new ReadingRefused('invalid', `device ${JSON.stringify(info.device)} is not usable`),
      );
    }
    const now = this.deps.clock.nowMicros();
    const unset = unsetClock(now);
    if (unset) return Promise.reject(unset);
    const payload: Record<string, string> = { model: info.model };
    if (info.fw_version) payload.fw_version = info.fw_version;
    const body = JSON.stringify(payload);
    if (this.lastInfo.get(info.device) === body) return Promise.resolve();
    this.lastInfo.set(info.device, body);
    return this.deps.queue
      .append({ device: info.device, kind: 'info', ts: now, body })
      .catch((err: unknown) => {
        this.lastInfo.delete(info.device);
        throw err;
      });
  }

  private timeOf(device: string, deviceTs: number | null, now: number): number {
    if (deviceTs !== null) {
      if (deviceTs >= EARLIEST_TS_MICROS && deviceTs <= now + MAX_FUTURE_MICROS) return deviceTs;
      this.clockFallbacks++;
      this.deps.log.warn(
        { device, deviceTs },
        'device time is implausible (clock not set?): using the gateway receive time',
      );
    }
    const last = this.lastStamp.get(device) ?? 0;
    // Past a step of the clock back (more than a second), the receive time follows the clock: kept
    // at `last + 1 µs`, every reading until the clock caught up would carry one moment.
    const stamp = now > last || last - now > CLOCK_STEP_BACK_MICROS ? now : last + 1;
    this.lastStamp.set(device, stamp);
    return stamp;
  }
}
