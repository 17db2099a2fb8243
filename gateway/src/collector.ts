import type { Clock } from './clock.ts';
import type { Logger } from './logger.ts';
import type { ReadingSink } from './reading.ts';
import type { CollectorCounters } from './status.ts';

/** What `--check` found about one part of the gateway. */
export interface CheckResult {
  ok: boolean;
  /** One line per fact found, for a person. */
  details: string[];
}

/** The answer to a `cmd/identify` downlink, as the cloud's identify endpoint words it. */
export type IdentifyResult = 'sent' | 'unsupported' | 'unreachable';

/**
 * One way in (one folder per way in: CONTRIBUTING.md). The constructor stores its dependencies and does
 * no I/O; `start` opens the listener, broker, port or subscription; `stop` closes everything it
 * opened, clears every timer and listener, and is safe to call twice.
 */
export interface Collector {
  readonly name: string;
  start(signal: AbortSignal): Promise<void>;
  stop(): Promise<void>;
  /** Probes the input for `--check` without handing anything to the buffer. */
  check(signal: AbortSignal): Promise<CheckResult>;
  /** Whether this collector has heard from `device` (so a downlink for it is its to execute). */
  owns(device: string): boolean;
  /** Makes the device show itself (LED blink) when its protocol allows it. */
  identify(device: string): Promise<IdentifyResult>;
}

/**
 * What a collector learns about its devices and must still know after a restart (a Shelly topic
 * prefix and the device it belongs to), kept in the buffer's file.
 */
export interface CollectorMemory {
  /** Everything this collector remembered, read when it starts. */
  recall(): Map<string, string>;
  /** Keeps `key → value` durably; a failed write is logged, and the value is kept in memory only. */
  remember(key: string, value: string): void;
}

/** What every collector is given. */
export interface CollectorDeps {
  sink: ReadingSink;
  clock: Clock;
  log: Logger;
  counters: CollectorCounters;
  memory: CollectorMemory;
}
