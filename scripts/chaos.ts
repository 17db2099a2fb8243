import os from 'node:os';
import process from 'node:process';
import { parseArgs } from 'node:util';
import type { DbKind } from '../test/helpers/databases.ts';
import { failures, formatTable, runScenarios, scenarioNamed, SCENARIOS, writeResults } from './chaos/run.ts';

/**
 * `npm run chaos [-- --scenarios cloud-kill,pg-outage --faults 100 --duration 3000 --short
 * --db sqlite|postgres|both --seed 1]`: the chaos scenarios (docs/reliability.md, "Chaos"), full
 * counts unless `--short` (the CI form of test/chaos/*.test.ts). `--faults` and `--duration`
 * override each scenario's own. PostgreSQL needs TEST_DATABASE_URL. Prints the table, writes the
 * JSON under chaos-results/, and exits 1 when anything acknowledged was lost, stored twice or never
 * sent, or on a 5xx the scenario does not allow.
 */
// Interrupted: exit, so that the cloud processes of the run are killed with it (installation.ts).
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(130));
const { values } = parseArgs({
  options: {
    scenarios: { type: 'string', default: SCENARIOS.map((s) => s.name).join(',') },
    faults: { type: 'string' },
    duration: { type: 'string' },
    short: { type: 'boolean', default: false },
    db: { type: 'string', default: process.env.TEST_DATABASE_URL ? 'both' : 'sqlite' },
    seed: { type: 'string', default: String(Date.now() % 1_000_000) },
  },
});
const dbs: DbKind[] = values.db === 'both' ? ['sqlite', 'postgres'] : [values.db as DbKind];
const scenarios = values.scenarios.split(',').map((name) => scenarioNamed(name.trim()));
const started = new Date().toISOString();
const meta = {
  started,
  machine: `${os.cpus()[0]?.model ?? 'cpu'} x${os.cpus().length}`,
  node: process.version,
  seed: Number(values.seed),
  full: !values.short,
  argv: process.argv.slice(2),
};
console.log(`chaos: ${started}, ${meta.machine}, node ${meta.node}, seed ${meta.seed}`);
const results = await runScenarios(scenarios, dbs, {
  full: !values.short,
  seed: Number(values.seed),
  ...(values.faults ? { faults: Number(values.faults) } : {}),
  ...(values.duration ? { durationMs: Number(values.duration) } : {}),
  log: (line) => console.log(`  ${line}`),
});
console.log(`\n${formatTable(results)}\n`);
for (const r of results) {
  const notes = Object.entries(r.notes).map(([k, v]) => `${k}: ${v}`);
  console.log(`${r.scenario} on ${r.db}: ${notes.join('; ')}`);
}
console.log(`\nJSON: ${writeResults(results, meta)}`);
const failed = results.filter((r) => failures(r).length > 0);
for (const r of failed) console.log(`FAILED ${r.scenario} on ${r.db}: ${failures(r).join(', ')}`);
process.exit(failed.length > 0 ? 1 : 0);
