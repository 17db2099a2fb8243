import { Cloud } from './cloud.ts';
import { ConfigError, loadConfig } from './config.ts';

/** `npm start`: the cloud with its embedded defaults (SQLite in ./data, outbox mail). */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`config error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const cloud = new Cloud({ config });
  await cloud.start();
  process.stdout.write(`cloud listening on ${cloud.config.baseUrl} (HTTP port ${cloud.port})\n`);
  process.stdout.write(
    cloud.config.smtpUrl
      ? 'mail goes through SMTP_URL; sign-in codes are never logged\n'
      : `mail goes to ${cloud.config.dataDir}/outbox/ (no SMTP_URL); sign-in codes are printed in the log\n`,
  );

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`${signal}: finishing in-flight requests and jobs\n`);
    cloud.drainAndStop().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`shutdown failed: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(
    `cloud failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
