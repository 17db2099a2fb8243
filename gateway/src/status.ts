/**
 * The gateway's own status in one place (docs/design/gateway.md): buffer depth and oldest reading
 * age, uplink state, per-collector counters. Modules hold a reference to their part and update it;
 * `snapshot()` is what the periodic status log line, `--check` and the status page show.
 */
export interface CollectorCounters {
  /** Messages or lines received from devices, before any judgement. */
  received: number;
  /** Readings durably buffered (the source was told "accepted"). */
  accepted: number;
  /** Inputs that were not a valid reading (bad format, out of range, unknown device). */
  invalid: number;
  /** Readings refused because the buffer was full or could not be written. */
  refused: number;
  /**
   * Of the refused, those gone for good because their source cannot send them again (a serial line;
   * an MQTT message is withheld its acknowledgement instead and comes back).
   */
  lost: number;
  /** Connection or I/O errors of the input itself (port gone, broker down). */
  errors: number;
  /** A free-form state such as `listening`, `open`, `reconnecting`. */
  state: string;
}

export type UplinkState = 'stopped' | 'connecting' | 'connected' | 'waiting';

export interface UplinkStatus {
  state: UplinkState;
  /** When the state last changed, ms since the epoch. */
  since: number;
  connects: number;
  /** Messages PUBACKed by the cloud with success. */
  published: number;
  /** Messages the cloud refused for good (PUBACK 0x99 / 0x83); kept in the dead-letter table. */
  rejected: number;
  /** Pauses after the cloud answered busy (PUBACK 0x97 / 0x80); the messages were sent again. */
  deferrals: number;
  inflight: number;
  lastError: string | null;
}

export interface BufferStatus {
  depth: number;
  capacity: number;
  /** Seconds since the oldest buffered reading was taken; null when empty. */
  oldestAgeSeconds: number | null;
  deadLetters: number;
}

/** A reading as the buffer took it, for the status page. */
export interface RecentReading {
  device: string;
  /** When it was taken (its own time, else when the gateway received it), ms since the epoch. */
  at: number;
  measurements: { kind: string; label: string | null; value: number; unit: string }[];
}

export interface StatusSnapshot {
  buffer: BufferStatus;
  uplink: UplinkStatus;
  collectors: Record<string, CollectorCounters>;
  /** The last readings buffered, newest first (at most RECENT_READINGS). */
  recent: RecentReading[];
}

/** How many buffered readings the status keeps for the status page. */
export const RECENT_READINGS = 20;

export class GatewayStatus {
  readonly uplink: UplinkStatus = {
    state: 'stopped',
    since: Date.now(),
    connects: 0,
    published: 0,
    rejected: 0,
    deferrals: 0,
    inflight: 0,
    lastError: null,
  };
  private readonly collectors = new Map<string, CollectorCounters>();
  private readonly recent: RecentReading[] = [];
  private bufferProbe: () => BufferStatus = () => ({
    depth: 0,
    capacity: 0,
    oldestAgeSeconds: null,
    deadLetters: 0,
  });

  collector(name: string): CollectorCounters {
    let c = this.collectors.get(name);
    if (!c) {
      c = { received: 0, accepted: 0, invalid: 0, refused: 0, lost: 0, errors: 0, state: 'stopped' };
      this.collectors.set(name, c);
    }
    return c;
  }

  setUplinkState(state: UplinkState, error?: string): void {
    if (this.uplink.state !== state) {
      this.uplink.state = state;
      this.uplink.since = Date.now();
    }
    if (error !== undefined) this.uplink.lastError = error;
  }

  /** Notes a reading the buffer took; only the last RECENT_READINGS are kept. */
  noteReading(reading: RecentReading): void {
    this.recent.unshift(reading);
    if (this.recent.length > RECENT_READINGS) this.recent.length = RECENT_READINGS;
  }

  /** The buffer reports itself through this probe (it queries SQLite only when asked). */
  setBufferProbe(probe: () => BufferStatus): void {
    this.bufferProbe = probe;
  }

  snapshot(): StatusSnapshot {
    return {
      buffer: this.bufferProbe(),
      uplink: { ...this.uplink },
      collectors: Object.fromEntries([...this.collectors].map(([k, v]) => [k, { ...v }])),
      recent: this.recent.map((r) => ({ ...r })),
    };
  }
}
