import type { SentReading } from './types.ts';

export interface CheckResult {
  acknowledged: number;
  stored: number;
  /** Acknowledged to its sender, absent from the cloud. */
  lost: string[];
  /** Stored more than once (each key once). */
  duplicated: string[];
  /** Stored, but never sent by anyone. */
  unexpected: string[];
}

/**
 * The lost/duplicated/unexpected checker (after Jepsen's): compares what the senders were told with
 * what the cloud's API returns. A reading sent without an acknowledgement may or may not be stored
 * (the answer can be lost after the commit); either is correct, so it counts only against
 * `unexpected`, never as lost.
 */
export function check(sent: Iterable<SentReading>, storedKeys: Iterable<string>): CheckResult {
  const sentKeys = new Map<string, boolean>();
  for (const s of sent) sentKeys.set(s.key, (sentKeys.get(s.key) ?? false) || s.acknowledged);
  const times = new Map<string, number>();
  let stored = 0;
  for (const key of storedKeys) {
    stored++;
    times.set(key, (times.get(key) ?? 0) + 1);
  }
  const lost: string[] = [];
  let acknowledged = 0;
  for (const [key, acked] of sentKeys) {
    if (!acked) continue;
    acknowledged++;
    if (!times.has(key)) lost.push(key);
  }
  const duplicated: string[] = [];
  const unexpected: string[] = [];
  for (const [key, n] of times) {
    if (n > 1) duplicated.push(key);
    if (!sentKeys.has(key)) unexpected.push(key);
  }
  return { acknowledged, stored, lost, duplicated, unexpected };
}
