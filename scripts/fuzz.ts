import os from 'node:os';
import process from 'node:process';
import { parseArgs } from 'node:util';
import type { DbKind } from '../test/helpers/databases.ts';
import { runFuzz } from './fuzz/run.ts';

/**
 * `npm run fuzz [-- --requests 100000 --mqtt 2000 --db sqlite|postgres|both --seed 1]`: the full fuzz
 * run (docs/reliability.md). PostgreSQL needs TEST_DATABASE_URL. Exits 1 on any 5xx (other than 503
 * `db_unavailable`), unhandled rejection or a dead process.
 */
const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '100000' },
    mqtt: { type: 'string', default: '2000' },
    db: { type: 'string', default: process.env.TEST_DATABASE_URL ? 'both' : 'sqlite' },
    seed: { type: 'string', default: String(Date.now() % 1_000_000) },
  },
});
const dbs: DbKind[] = values.db === 'both' ? ['sqlite', 'postgres'] : [values.db as DbKind];
let failed = false;
console.log(
  `fuzz: ${new Date().toISOString()}, ${os.cpus()[0]?.model ?? 'cpu'} x${os.cpus().length}, node ${process.version}, seed ${values.seed}`,
);
for (const db of dbs) {
  const report = await runFuzz({
    db,
    requests: Number(values.requests),
    mqttSessions: Number(values.mqtt),
    seed: Number(values.seed),
  });
  console.log(`\n${db}: ${report.seconds.toFixed(0)} s, ${report.mqttPackets} MQTT packets in the sessions`);
  console.log(report.table);
  console.log(
    `uncaught exceptions and unhandled rejections: ${report.unhandled.length}; error log lines: ${report.errorLogs.length}; alive after: ${report.alive}`,
  );
  for (const f of report.tally.failures.slice(0, 20))
    console.log(`5xx ${f.status}: ${f.what}\n  -> ${f.body}`);
  for (const u of report.unhandled.slice(0, 5)) console.log(`unhandled: ${u}`);
  for (const l of report.errorLogs.slice(0, 5)) console.log(`error log: ${JSON.stringify(l).slice(0, 600)}`);
  if (report.tally.failures.length || report.unhandled.length || !report.alive) failed = true;
}
process.exit(failed ? 1 : 0);
