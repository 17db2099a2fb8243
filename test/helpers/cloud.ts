import fs from 'node:fs';
import { Writable } from 'node:stream';
import { Cloud } from '../../cloud/src/cloud.ts';
import type { Clock } from '../../cloud/src/clock.ts';
import { loadConfig } from '../../cloud/src/config.ts';
import { createLogger } from '../../cloud/src/logger.ts';
import type { SentMail } from '../../cloud/src/mail/mailer.ts';
import { tempDir, testDatabase, type DbKind, type TestDatabase } from './databases.ts';
import { HttpClient } from './http.ts';
import { describeLeaks, SecretWatch } from './secrets.ts';

export interface TestCloud {
  cloud: Cloud;
  url: string;
  http: HttpClient;
  database: TestDatabase;
  /** Every log line the cloud wrote, parsed. */
  logs: Record<string, unknown>[];
  /** The secrets the cloud issued and the error bodies it answered, for the leak check in `stop`. */
  secrets: SecretWatch;
  /** Resolves with the next mail sent to `to`. Call before the action that sends it. */
  nextMail(to: string): Promise<SentMail>;
  stop(): Promise<void>;
}

/**
 * A real cloud on 127.0.0.1, port 0, with its own database and data directory, capturing its logs.
 * `env` overrides the environment as an operator would set it. `sameDatabaseAs` starts a second
 * process of the same installation (one SQLite file or PostgreSQL schema shared by both); the
 * database then belongs to the first, which disposes of it.
 */
export async function startTestCloud(
  options: {
    db?: DbKind;
    env?: Record<string, string>;
    clock?: Clock;
    sameDatabaseAs?: TestCloud;
    /**
     * Another process of the installation on a database that belongs to the caller (who disposes of
     * it), with a data directory of its own, as replicas on separate machines have.
     */
    replicaOf?: TestDatabase;
    /** Start the MQTT bridge on a free port (`cloud.mqttPort`); MQTT_PORT stays 0 otherwise. */
    mqtt?: boolean;
  } = {},
): Promise<TestCloud> {
  const shared = options.sameDatabaseAs?.database ?? options.replicaOf;
  const database = shared ?? testDatabase(options.db ?? 'sqlite');
  const ownDataDir = options.replicaOf ? tempDir('sm-replica-') : null;
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    MQTT_PORT: '0',
    DATA_DIR: ownDataDir ?? database.dataDir,
    DATABASE_URL: database.url,
    LOG_LEVEL: 'info',
    // Tests send readings of fixed dates (2026) against the real clock; the product's 730 days would
    // refuse them from 2028 on. Tests of retention set their own.
    RETENTION_DAYS: '36500',
    ...options.env,
  });
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const cloud = new Cloud({
    config,
    clock: options.clock,
    log: createLogger(config.logLevel, sink),
    database: { schema: database.schema },
    jobPollMs: 50,
    ...(options.mqtt ? { mqttListenPort: 0 } : {}),
  });
  const secrets = new SecretWatch();
  await cloud.start();
  cloud.services.mailer.on('sent', (mail) => secrets.recordMail(mail));
  const url = cloud.url;
  return {
    cloud,
    url,
    http: new HttpClient(url, (method, path, answer) =>
      secrets.recordAnswer(method, path, answer.status, answer.text, answer.headers.getSetCookie()),
    ),
    database,
    logs,
    secrets,
    nextMail: (to) =>
      new Promise((resolve) => {
        const onSent = (mail: SentMail) => {
          if (mail.to !== to) return;
          cloud.services.mailer.off('sent', onSent);
          resolve(mail);
        };
        cloud.services.mailer.on('sent', onSent);
      }),
    // Every test cloud ends with the "secrets never logged" check (test/helpers/secrets.ts).
    stop: async () => {
      await cloud.stop();
      if (!shared) await database.dispose();
      if (ownDataDir) fs.rmSync(ownDataDir, { recursive: true, force: true });
      const leaks = secrets.leaks(logs);
      if (leaks.length > 0) throw new Error(`secrets in logs or error bodies:\n${describeLeaks(leaks)}`);
    },
  };
}

/** The sign-in code in a mail: from its `.eml` file when it went to the outbox. */
export function codeFromMail(mail: SentMail): string {
  const text = mail.file ? fs.readFileSync(mail.file, 'utf8') : `Subject: ${mail.subject}\n${mail.text}`;
  const match = /^Subject: Your sign-in code: ([A-Z0-9]{3}-[A-Z0-9]{3})$/m.exec(text);
  if (!match) throw new Error(`no code in mail:\n${text}`);
  return match[1]!;
}

/** The magic link in a mail (quoted-printable soft breaks undone). */
export function linkFromMail(mail: SentMail): string {
  const text = mail.file
    ? fs.readFileSync(mail.file, 'utf8').replace(/=\n/g, '').replace(/=3D/g, '=')
    : mail.text;
  const match = /(https?:\/\/\S+\/app\/auth\/callback\?t=\S+)/.exec(text);
  if (!match) throw new Error(`no link in mail:\n${text}`);
  return match[1]!;
}

export interface SignedIn {
  email: string;
  cookie: string;
  sessionId: string;
  userId: string;
  accountId: string;
  /** An admin user API token. */
  token: string;
}

/** Signs up like a person (code from the mail), then makes an admin token with the cookie. */
/**
 * Signs up through `t`. With `replicas` (other processes of the same installation) the sign-in mail
 * may be sent by any of them: the mail job goes to whichever process claims it first.
 */
export async function signUp(
  t: TestCloud,
  email: string,
  replicas: readonly TestCloud[] = [],
): Promise<SignedIn> {
  const mail = Promise.race([t, ...replicas].map((c) => c.nextMail(email)));
  const requested = await t.http.post('/v1/auth/request', { email });
  if (requested.status !== 200) throw new Error(`auth/request: ${requested.status}`);
  const code = codeFromMail(await mail);
  const verified = await t.http.post('/v1/auth/verify', { email, code });
  if (verified.status !== 200) throw new Error(`auth/verify: ${verified.status} ${verified.text}`);
  const cookie = verified.cookie('os_session');
  if (!cookie) throw new Error('no session cookie');
  const created = await t.http.post(
    '/v1/tokens',
    { label: 'tests', scope: 'admin' },
    { cookie: `os_session=${cookie}` },
  );
  if (created.status !== 201) throw new Error(`tokens: ${created.status} ${created.text}`);
  const me = await t.http.get('/v1/accounts/me', { token: created.json.token as string });
  return {
    email,
    cookie,
    sessionId: verified.json.session_id as string,
    userId: verified.json.user_id as string,
    accountId: me.json.id as string,
    token: created.json.token as string,
  };
}
