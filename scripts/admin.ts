import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { AuditRepository } from '../cloud/src/audit/audit.repository.ts';
import { SystemClock } from '../cloud/src/clock.ts';
import { ConfigError, loadConfig } from '../cloud/src/config.ts';
import { ApiError } from '../cloud/src/errors.ts';
import { PublicRepository } from '../cloud/src/public/public.repository.ts';
import { isControl, PublicService } from '../cloud/src/public/public.service.ts';
import { openDatabase } from '../cloud/src/storage/database.ts';
import { formatSeconds } from '../shared/time.ts';

const USAGE = `usage: npm run admin -- flags [list] [--all] [--json]
       npm run admin -- flags hide <sensor_id>
       npm run admin -- flags unhide <sensor_id>
       npm run admin -- flags dismiss <flag_id>

Works on the database the cloud is configured with (DATABASE_URL, or DATA_DIR's SQLite file).
  list      open flags about public sensors, oldest first (--all: resolved ones too)
  hide      take the sensor off the public API at once, on every replica; resolves its open flags
  unhide    put a hidden sensor back (it shows again while its device is public)
  dismiss   resolve one flag without hiding anything`;

/**
 * `npm run admin`: the operator's tool (docs/operations.md, "Public API flags"). It opens the
 * configured database as the cloud does (migrations included) and acts through the same service
 * the cloud uses, so a hidden sensor leaves every running process's answers at once.
 */
async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { all: { type: 'boolean', default: false }, json: { type: 'boolean', default: false } },
    });
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [area, command = 'list', target] = positionals;
  if (area !== 'flags' || !['list', 'hide', 'unhide', 'dismiss'].includes(command)) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  if (command !== 'list' && !target) {
    process.stderr.write(`flags ${command} needs an id\n${USAGE}\n`);
    return 2;
  }
  const config = loadConfig(process.env);
  // The tool works on the cloud's database, never on a new one: without DATA_DIR (set in the
  // service's unit, not in the operator's shell) it would make an empty ./data/cloud.db and report
  // "no open flags" from it.
  const sqliteFile = config.databaseUrl.startsWith('sqlite:')
    ? config.databaseUrl.slice('sqlite:'.length)
    : null;
  if (sqliteFile !== null && !fs.existsSync(sqliteFile)) {
    process.stderr.write(
      `no database at ${sqliteFile}: set DATA_DIR (or DATABASE_URL) as the cloud's service has it\n`,
    );
    return 2;
  }
  const database = await openDatabase(config.databaseUrl);
  try {
    const service = new PublicService({
      db: database.db,
      clock: new SystemClock(),
      publicRepository: new PublicRepository(),
      audit: new AuditRepository(),
      onChange: () => {},
    });
    switch (command) {
      case 'list': {
        const flags = await service.flags({ all: values.all });
        if (values.json) {
          process.stdout.write(`${JSON.stringify(flags, null, 2)}\n`);
          return 0;
        }
        if (flags.length === 0) {
          process.stdout.write(values.all ? 'no flags\n' : 'no open flags\n');
          return 0;
        }
        for (const f of flags) {
          const state = f.resolution ?? (f.hidden_at !== null ? 'open (sensor hidden)' : 'open');
          process.stdout.write(
            `${f.id}  ${formatSeconds(f.created_at)}  ${state}\n` +
              `  sensor ${f.sensor_id} (${f.kind ?? 'unknown'}, ${printable(f.nickname ?? '?')}, ${printable(f.location_name ?? '?')})\n` +
              `  reporter ${f.reporter}: ${JSON.stringify(f.reason)}\n`,
          );
        }
        return 0;
      }
      case 'hide': {
        const { resolved } = await service.hide(target!);
        process.stdout.write(`sensor ${target} hidden; ${resolved} open flag(s) resolved\n`);
        return 0;
      }
      case 'unhide': {
        const removed = await service.unhide(target!);
        process.stdout.write(
          removed ? `sensor ${target} shown again\n` : `sensor ${target} was not hidden\n`,
        );
        return removed ? 0 : 1;
      }
      default: {
        const dismissed = await service.dismiss(target!);
        process.stdout.write(dismissed ? `flag ${target} dismissed\n` : `no open flag ${target}\n`);
        return dismissed ? 0 : 1;
      }
    }
  } finally {
    await database.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof ConfigError) process.stderr.write(`config error: ${err.message}\n`);
    else if (err instanceof ApiError) process.stderr.write(`${err.code}: ${err.message}\n`);
    else process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(err instanceof ConfigError ? 2 : 1);
  },
);

/** Text from the public as a terminal shows it: control characters (escape sequences) as \uXXXX. */
function printable(text: string): string {
  return [...text]
    .map((c) => (isControl(c) ? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}` : c))
    .join('');
}
