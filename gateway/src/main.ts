import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type GatewayConfig } from './config.ts';
import { EnrolError, enrolFromBoot } from './enrol.ts';
import { Gateway } from './gateway.ts';
import { createLogger } from './logger.ts';

/**
 * `npm run gateway -- --config FILE [--check | --validate | --enrol-from DIR]` (the production
 * build: `node dist/gateway/gateway.mjs --config FILE ...`). --validate only checks the file. With
 * --check: validate the configuration, probe the buffer, the uplink and each collector, print what
 * was found and exit 0 when all is well, 1 when not. --enrol-from DIR installs the bridge bundle and
 * gateway.yaml an installer put in DIR (the boot partition, enrol.ts) as FILE and exits: 0 when
 * done or when there was nothing to do, 2 when the files are invalid (they are then left in DIR).
 * Without these: run until SIGTERM/SIGINT. A configuration error exits 2.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      config: { type: 'string', short: 'c' },
      check: { type: 'boolean', default: false },
      validate: { type: 'boolean', default: false },
      'enrol-from': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help || !values.config) {
    process.stdout.write(
      'usage: node gateway.mjs --config FILE [--check | --validate | --enrol-from DIR]  (from a checkout: npm run gateway -- ...)\n',
    );
    process.exit(values.help ? 0 : 2);
  }
  if (values['enrol-from'] !== undefined) {
    try {
      const { installed, configFile } = enrolFromBoot({
        bootDir: values['enrol-from'],
        configFile: values.config,
      });
      process.stdout.write(
        installed.length
          ? `enrolled: ${installed.join(' and ')} from ${values['enrol-from']} installed for ${configFile}, and deleted there\n`
          : `enrol: nothing to install in ${values['enrol-from']}\n`,
      );
      process.exit(0);
    } catch (err) {
      if (err instanceof EnrolError) {
        process.stderr.write(`enrol error: ${err.message}\n`);
        process.exit(2);
      }
      throw err;
    }
  }
  let config: GatewayConfig;
  try {
    config = loadConfig(values.config);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`config error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }

  if (values.validate) {
    process.stdout.write(`config ${config.file}: valid (gateway id ${config.gatewayId})\n`);
    process.exit(0);
  }

  if (values.check) {
    const log = createLogger('warn', process.stderr);
    const gateway = new Gateway({ config, log });
    const out = (line: string) => process.stdout.write(`${line}\n`);
    out(`config ${config.file}: valid`);
    out(`  gateway id ${config.gatewayId}, data in ${config.dataDir}`);
    const report = await gateway.check(AbortSignal.timeout(60_000));
    for (const { name, result } of report.sections) {
      out(`${result.ok ? 'ok  ' : 'FAIL'} ${name}`);
      for (const d of result.details) out(`     ${d}`);
    }
    out(`status ${JSON.stringify(report.status)}`);
    out(report.ok ? 'all checks passed' : 'some checks failed');
    process.exit(report.ok ? 0 : 1);
  }

  const log = createLogger(config.logLevel);
  const gateway = new Gateway({ config, log });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    gateway.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  await gateway.start();
}

main().catch((err: unknown) => {
  process.stderr.write(
    `gateway failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
