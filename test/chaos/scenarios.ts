import { describe, expect, it } from '@jest/globals';
import { failures, SCENARIOS } from '../../scripts/chaos/run.ts';
import { DATABASES } from '../helpers/databases.ts';

/**
 * The short form of `npm run chaos` (docs/reliability.md, "Chaos"): every scenario with a few faults,
 * on every database it applies to, split over a few test files (`describeScenarios`) so that they
 * run beside the rest of the suite rather than one after the other at its end (checker.unit.test.ts
 * checks that every scenario is in one). Each one starts real cloud processes (and, for the database
 * outage, a PostgreSQL server of its own), loads them with HTTP and mutual-TLS MQTT 5 senders, and
 * checks what the senders were told against what the API returns: nothing acknowledged lost, nothing
 * stored twice or never sent, no 5xx the scenario does not allow. The seed is fixed; a failure
 * replays with `npm run chaos -- --short --scenarios <name> --db <db> --seed 24`.
 */
export function describeScenarios(names: string[]): void {
  const unknown = names.filter((n) => !SCENARIOS.some((s) => s.name === n));
  if (unknown.length > 0) throw new Error(`no chaos scenario ${unknown.join(', ')}`);
  const cases = SCENARIOS.filter((s) => names.includes(s.name)).flatMap((scenario) =>
    DATABASES.filter((db) => !scenario.databases || scenario.databases.includes(db)).map(
      (db) => [scenario.name, db, scenario] as const,
    ),
  );
  describe.each(cases)('chaos scenario %s on %s', (_name, db, scenario) => {
    it('loses nothing acknowledged, stores nothing twice or unsent, and answers no unexpected 5xx', async () => {
      const r = await scenario.run({ full: false, db, seed: 24, log: () => undefined });
      expect({ failures: failures(r), examples: r.examples }).toEqual({
        failures: [],
        examples: { lost: [], duplicated: [], unexpected: [] },
      });
      expect(r.faults).toBeGreaterThan(0);
      expect(r.acknowledged).toBeGreaterThan(0);
      expect(r.stored).toBeGreaterThanOrEqual(r.acknowledged);
      if (scenario.name === 'pg-outage') expect(r.notes['refused while down']).toBeGreaterThan(0);
      if (scenario.name === 'outage-72h') expect(r.notes['order: readings seen in order in all']).toBe(6000);
      // The overload asked more of the cloud than it took: the generator reached its open limit (readings
      // due and not sent) or the cloud refused some (503, 429). What it offered against the rate measured
      // before is in the notes; on a loaded CI machine the cloud can be slower during the overload than
      // when measured, so that ratio alone says little.
      if (scenario.name === 'overload')
        expect(
          Number(r.notes['not sent (generator at its open limit)']) +
            Number(r.notes['503'] ?? 0) +
            Number(r.notes['429'] ?? 0),
        ).toBeGreaterThan(0);
      // The gateway accepted readings of each kind of device: Shelly (HTTP), serial and ChirpStack.
      if (scenario.name === 'gateway-kill')
        for (const kind of ['shellyht', 'serial', 'a84041'])
          expect(Number(String(r.notes[`${kind} sent/accepted`]).split('/')[1])).toBeGreaterThan(0);
    }, 600_000);
  });
}
