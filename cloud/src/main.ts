import { Cloud } from './cloud.ts';
import { ConfigError, loadConfig } from './config.ts';
import { PkiError } from './pki/pki.ts';

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
  process.stderr.write(`${startFailure(err)}\n`);
  process.exit(1);
});

/**
 * Why the start failed, in one line naming the settings to look at (the stack too at
 * LOG_LEVEL=debug or trace): an operator reads it in the journal, where a stack trace of Node's
 * internals says less than the variable that holds the wrong value.
 */
function startFailure(err: unknown): string {
  if (!(err instanceof Error)) return `cloud failed to start: ${String(err)}`;
  const e = err as NodeJS.ErrnoException & { code?: string };
  const look =
    e.syscall === 'listen' || e.syscall === 'getaddrinfo' || e.code === 'EADDRINUSE'
      ? 'HOST, PORT, MQTT_HOST, MQTT_PORT'
      : err instanceof PkiError
        ? 'PKI_CA_CERT_FILE, PKI_CA_KEY_FILE, MQTT_TLS_CERT_FILE, MQTT_TLS_KEY_FILE'
        : e.path !== undefined || e.code === 'SQLITE_CANTOPEN'
          ? "DATA_DIR, DATABASE_URL (and the files' owner and mode)"
          : e.code === 'ECONNREFUSED' || /^(28|3D|08)/.test(e.code ?? '')
            ? 'DATABASE_URL'
            : null;
  const line = `cloud failed to start: ${e.message.replace(/\s*\n\s*/g, ' ')}${look ? ` (check ${look})` : ''}`;
  const verbose = ['debug', 'trace'].includes(process.env.LOG_LEVEL ?? '');
  return verbose && e.stack ? `${line}\n${e.stack}` : line;
}
