import { EARLIEST_TS_MICROS, type ValidMeasurement } from '../../shared/ingest.ts';

/**
 * What every collector produces, whatever its way in: one device's measurements taken at one time.
 * `ts` is the time the reading was taken (the device's own clock when it sends one, else the
 * gateway's receive time), never the upload time, so a backlog lands at the right place in history.
 */
export interface Reading {
  /** The device's local id: the third segment of the uplink topic (`service/<account>/<device>`). */
  device: string;
  /**
   * Microseconds since the epoch, from the device's own clock; null when the device sent no time,
   * and the intake then stamps the gateway's receive time.
   */
  ts: number | null;
  /** 1 to 32 measurements, validated with the cloud's own rules (shared/ingest.ts). */
  measurements: ValidMeasurement[];
}

/** A device's connection state as the spec's last-will message carries it (docs/api/mqtt.md). */
export interface DeviceState {
  device: string;
  status: 'online' | 'offline';
  /** Microseconds since the epoch. */
  at: number;
  reason?: string;
}

/** Firmware version and model, forwarded once per change to `service/<account>/<device>/info`. */
export interface DeviceInfo {
  device: string;
  model: string;
  fw_version?: string;
}

/** Why a reading was not accepted; a collector turns it into its protocol's refusal. */
/**
 * `clock_unset`: the gateway's own clock reads before 2000 (a Pi that booted without a network and
 * without a battery clock); every time it would stamp or judge would be wrong, so it accepts nothing.
 */
export type RefusalCode = 'invalid' | 'buffer_full' | 'buffer_error' | 'clock_unset';

export class ReadingRefused extends Error {
  constructor(
    readonly code: RefusalCode,
    message: string,
  ) {
    super(message);
  }
}

/** The refusal while the gateway's clock reads before 2000 (`clock_unset`), else null. */
export function unsetClock(now: number): ReadingRefused | null {
  if (now >= EARLIEST_TS_MICROS) return null;
  return new ReadingRefused(
    'clock_unset',
    `the gateway's clock reads ${new Date(Math.floor(now / 1000)).toISOString()}, before 2000: it accepts readings once the clock is set (NTP, or a battery clock)`,
  );
}

/**
 * Where collectors hand what they received. `accept` resolves only once the reading is durably in
 * the buffer: that is when a source may be told "accepted" (HTTP 200, PUBACK); it rejects with a
 * ReadingRefused otherwise. `identify` is called by the uplink for `cmd/identify` downlinks.
 */
export interface ReadingSink {
  accept(reading: Reading): Promise<void>;
  deviceState(state: DeviceState): Promise<void>;
  deviceInfo(info: DeviceInfo): Promise<void>;
}

/** A device name usable as one MQTT topic segment and as a cloud `local_id`. */
export const DEVICE_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
