import type { DbKind } from '../../test/helpers/databases.ts';

/**
 * The contract between `npm run chaos` (scripts/chaos.ts, scripts/chaos/run.ts), its scenarios and the checker
 * (docs/reliability.md, "Chaos"). A scenario sends readings while it injects faults, records what
 * each sender was told (acknowledged or not), then reads back what the cloud's API returns.
 */

/** One reading as a sender sent it. `key` identifies it across sender, cloud and checker. */
export interface SentReading {
  /** `${deviceLocalId}/${channel}/${tsMicros}` (or the value), see `readingKey`. */
  key: string;
  /** True once the sender was told it was accepted: HTTP 2xx, PUBACK 0x00, the gateway's acceptance. */
  acknowledged: boolean;
}

/** A scenario's options: `full` for the counts quoted in the docs, otherwise the short CI form. */
export interface ScenarioOptions {
  full: boolean;
  db: DbKind;
  /** Overrides the scenario's default number of faults. */
  faults?: number;
  /** Overrides the scenario's default duration, in milliseconds. */
  durationMs?: number;
  seed: number;
  log: (line: string) => void;
}

export interface ScenarioResult {
  scenario: string;
  db: DbKind;
  faults: number;
  durationMs: number;
  sent: number;
  acknowledged: number;
  stored: number;
  lost: number;
  duplicated: number;
  unexpected: number;
  /** Answers of 500 and above other than the 503s the scenario expects (e.g. a database outage). */
  http5xx: number;
  /** The longest time from the end of a fault until the service accepted readings again, in ms. */
  recoveryMs: number;
  /** Up to 20 example keys of each kind of discrepancy, for the JSON report. */
  examples: { lost: string[]; duplicated: string[]; unexpected: string[] };
  /** Scenario-specific figures (peak RSS, answers by status, 503s during an outage, ...). */
  notes: Record<string, number | string>;
}

export interface Scenario {
  name: string;
  /** What it does, one line, for the table's legend. */
  description: string;
  /** The databases it applies to (a PostgreSQL outage has no SQLite form); all when absent. */
  databases?: DbKind[];
  run(options: ScenarioOptions): Promise<ScenarioResult>;
}

/** `at`: the reading's time in microseconds, or its value where the sender does not know the time. */
export function readingKey(deviceLocalId: string, channel: string, at: number | bigint): string {
  return `${deviceLocalId}/${channel}/${at}`;
}
