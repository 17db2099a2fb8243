import { check } from './checker.ts';
import { storedKeys, type Installation } from './installation.ts';
import type { Load } from './load.ts';
import type { ScenarioOptions, ScenarioResult } from './types.ts';

/** A small seeded generator (mulberry32): a run's fault schedule is replayed from its seed. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The scenario's figures: what the load's senders were told against what the cloud's API returns
 * (the account export), and the server errors the senders met.
 */
export async function result(
  name: string,
  options: ScenarioOptions,
  inst: Installation,
  load: Load,
  figures: { faults: number; startedAt: number; recoveryMs: number; notes: ScenarioResult['notes'] },
): Promise<ScenarioResult> {
  const checked = check(load.readings(), await storedKeys(inst));
  const { tally } = load;
  const notes: ScenarioResult['notes'] = { ...figures.notes };
  for (const [what, n] of Object.entries(tally.answers).sort()) notes[what] = n;
  if (tally.refused.length > 0) notes.refused = tally.refused.length;
  for (const [i, e] of [...tally.serverErrors, ...tally.bad503, ...tally.refused].slice(0, 5).entries())
    notes[`example ${i + 1}`] = e;
  return {
    scenario: name,
    db: options.db,
    faults: figures.faults,
    durationMs: Math.round(performance.now() - figures.startedAt),
    sent: load.sent,
    acknowledged: checked.acknowledged,
    stored: checked.stored,
    lost: checked.lost.length,
    duplicated: checked.duplicated.length,
    unexpected: checked.unexpected.length,
    http5xx: tally.serverErrors.length + tally.bad503.length,
    recoveryMs: Math.round(figures.recoveryMs),
    examples: {
      lost: checked.lost.slice(0, 20),
      duplicated: checked.duplicated.slice(0, 20),
      unexpected: checked.unexpected.slice(0, 20),
    },
    notes,
  };
}
