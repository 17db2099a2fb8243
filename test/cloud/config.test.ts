import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { ConfigError, loadConfig } from '../../cloud/src/config.ts';
import { tempDir } from '../helpers/databases.ts';
import { ROOT } from '../helpers/process.ts';

/** The error loadConfig throws for `env`. */
function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe('loadConfig', () => {
  it('starts from the documented defaults: port 8080, SQLite in ./data, open sign-up, enforced limits', () => {
    const config = loadConfig({});
    const dataDir = path.resolve('./data');
    expect(config).toEqual({
      port: 8080,
      host: '0.0.0.0',
      mqttPort: 8883,
      mqttHost: '0.0.0.0',
      mqttUrl: null,
      pki: {
        dir: path.join(dataDir, 'pki'),
        caCertFile: null,
        caKeyFile: null,
        serverCertFile: null,
        serverKeyFile: null,
        serverHosts: ['localhost', '127.0.0.1', '::1'],
      },
      redis: null,
      dataDir,
      databaseUrl: `sqlite:${path.join(dataDir, 'cloud.db')}`,
      baseUrl: 'http://localhost:8080',
      publicBaseUrl: 'http://localhost:8080',
      baseUrlDerived: true,
      dashboardDomain: null,
      smtpUrl: null,
      mailFrom: 'Sensor Monitoring <no-reply@localhost>',
      signup: 'open',
      sessionMaxDays: 30,
      retentionDays: 730,
      jobRetentionDays: 7,
      jobClaimSeconds: 300,
      ingestAdmission: { maxPending: 10_000, maxWaitMs: 2000 },
      ingestWriters: 4,
      httpLimits: { maxConnections: 10_000, maxPipelined: 4096 },
      liveMaxStreams: 1000,
      rateLimitMode: 'enforce',
      rateLimits: { mgmtPerMin: 600, ingestPerMin: 60, readPerMin: 120, reportPerMin: 4, publicPerMin: 600 },
      webhookAllowPrivate: false,
      trustProxy: null,
      logLevel: 'info',
      shutdownDrainMs: 5000,
      metricsAllow: ['loopback'],
      metricsToken: null,
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.rateLimits)).toBe(true);
  });

  it('reads every variable an operator sets', () => {
    const config = loadConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      MQTT_PORT: '0',
      DATA_DIR: '/var/lib/monitor',
      DATABASE_URL: 'postgresql://monitor@db:5432/monitor',
      BASE_URL: 'https://api.example.com/',
      PUBLIC_BASE_URL: 'https://public.example.com',
      DASHBOARD_DOMAIN: 'app.example.com',
      SMTP_URL: 'smtps://user:pass@mail.example.com',
      MAIL_FROM: 'Alerts <alerts@example.com>',
      SIGNUP: 'closed',
      SESSION_MAX_DAYS: '7',
      RETENTION_DAYS: '365',
      JOB_RETENTION_DAYS: '14',
      JOB_CLAIM_SECONDS: '30',
      RATE_LIMIT_MODE: 'warn',
      RATE_LIMIT_MGMT_PER_MIN: '5',
      RATE_LIMIT_INGEST_PER_MIN: '6',
      RATE_LIMIT_READ_PER_MIN: '7',
      RATE_LIMIT_REPORT_PER_MIN: '8',
      RATE_LIMIT_PUBLIC_PER_MIN: '9',
      WEBHOOK_ALLOW_PRIVATE: '1',
      TRUST_PROXY: 'loopback, 10.0.0.0/8',
      LOG_LEVEL: 'debug',
      SHUTDOWN_DRAIN_MS: '10000',
      INGEST_MAX_PENDING: '500',
      INGEST_MAX_WAIT_MS: '750',
      INGEST_WRITERS: '2',
      HTTP_MAX_CONNECTIONS: '2000',
      HTTP_MAX_PIPELINED: '512',
      LIVE_MAX_STREAMS: '50',
      METRICS_ALLOW: '10.1.0.0/16, 127.0.0.1',
      METRICS_TOKEN: 'scrape-token-0123456789',
      MQTT_HOST: '0.0.0.0',
      MQTT_URL: 'mqtts://mqtt.example.com:8883',
      MQTT_TLS_HOSTS: 'mqtt.example.com,10.0.0.5',
      PKI_CA_CERT_FILE: '/etc/monitor/ca.crt',
      PKI_CA_KEY_FILE: '/etc/monitor/ca.key',
      MQTT_TLS_CERT_FILE: '/etc/monitor/server.crt',
      MQTT_TLS_KEY_FILE: '/etc/monitor/server.key',
      REDIS_URL: 'redis://:secret@redis.example.com:6379/2',
      REDIS_PREFIX: 'monitor:',
    });
    expect(config).toEqual({
      port: 0,
      host: '127.0.0.1',
      mqttPort: 0,
      mqttHost: '0.0.0.0',
      mqttUrl: 'mqtts://mqtt.example.com:8883',
      pki: {
        dir: '/var/lib/monitor/pki',
        caCertFile: '/etc/monitor/ca.crt',
        caKeyFile: '/etc/monitor/ca.key',
        serverCertFile: '/etc/monitor/server.crt',
        serverKeyFile: '/etc/monitor/server.key',
        serverHosts: ['mqtt.example.com', '10.0.0.5'],
      },
      redis: { url: 'redis://:secret@redis.example.com:6379/2', prefix: 'monitor:' },
      dataDir: '/var/lib/monitor',
      databaseUrl: 'postgresql://monitor@db:5432/monitor',
      baseUrl: 'https://api.example.com',
      publicBaseUrl: 'https://public.example.com',
      baseUrlDerived: false,
      dashboardDomain: 'app.example.com',
      smtpUrl: 'smtps://user:pass@mail.example.com',
      mailFrom: 'Alerts <alerts@example.com>',
      signup: 'closed',
      sessionMaxDays: 7,
      retentionDays: 365,
      jobRetentionDays: 14,
      jobClaimSeconds: 30,
      ingestAdmission: { maxPending: 500, maxWaitMs: 750 },
      ingestWriters: 2,
      httpLimits: { maxConnections: 2000, maxPipelined: 512 },
      liveMaxStreams: 50,
      rateLimitMode: 'warn',
      rateLimits: { mgmtPerMin: 5, ingestPerMin: 6, readPerMin: 7, reportPerMin: 8, publicPerMin: 9 },
      webhookAllowPrivate: true,
      trustProxy: ['loopback', '10.0.0.0/8'],
      logLevel: 'debug',
      shutdownDrainMs: 10000,
      metricsAllow: ['10.1.0.0/16', '127.0.0.1'],
      metricsToken: 'scrape-token-0123456789',
    });
  });

  it('reads RATE_LIMIT_SYNC_MS in milliseconds, 0 included, and leaves it to the limiter when unset', () => {
    expect(loadConfig({ RATE_LIMIT_SYNC_MS: '250' }).rateLimitSyncMs).toBe(250);
    expect(loadConfig({ RATE_LIMIT_SYNC_MS: '0' }).rateLimitSyncMs).toBe(0);
    expect(loadConfig({}).rateLimitSyncMs).toBeUndefined();
    for (const value of ['-1', 'soon', '1.5', '60001'])
      expect(configError({ RATE_LIMIT_SYNC_MS: value }).message).toMatch(/^invalid RATE_LIMIT_SYNC_MS=/);
  });

  it('treats an empty value as unset, and derives the public URL from BASE_URL', () => {
    const config = loadConfig({ PORT: '', SIGNUP: '', BASE_URL: 'http://monitor.local:9000//' });
    expect(config.port).toBe(8080);
    expect(config.signup).toBe('open');
    expect(config.baseUrl).toBe('http://monitor.local:9000');
    expect(config.publicBaseUrl).toBe('http://monitor.local:9000');
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '-1'],
    ['PORT', '80.5'],
    ['MQTT_PORT', 'mqtt'],
    ['MQTT_URL', 'https://mqtt.example.com'],
    ['MQTT_TLS_HOSTS', 'a b'],
    ['PKI_CA_KEY_FILE', '/x/ca.key'],
    ['SIGNUP', 'maybe'],
    ['DATABASE_URL', 'mysql://x'],
    ['DATABASE_URL', '/var/lib/cloud.db'],
    ['BASE_URL', 'ftp://x'],
    ['BASE_URL', 'not a url'],
    ['PUBLIC_BASE_URL', 'example.com'],
    ['DASHBOARD_DOMAIN', 'https://app.example.com'],
    ['SMTP_URL', 'http://mail.example.com'],
    ['SESSION_MAX_DAYS', '0'],
    ['SESSION_MAX_DAYS', '3651'],
    ['SESSION_MAX_DAYS', '30d'],
    ['RETENTION_DAYS', '0'],
    ['JOB_RETENTION_DAYS', '0'],
    ['JOB_RETENTION_DAYS', 'week'],
    ['JOB_CLAIM_SECONDS', '0'],
    ['JOB_CLAIM_SECONDS', '86401'],
    ['RATE_LIMIT_MODE', 'loud'],
    ['RATE_LIMIT_MGMT_PER_MIN', 'many'],
    ['RATE_LIMIT_INGEST_PER_MIN', '-5'],
    ['WEBHOOK_ALLOW_PRIVATE', 'yes'],
    ['TRUST_PROXY', 'proxy.example.com'],
    ['TRUST_PROXY', '10.0.0.0/33'],
    ['METRICS_ALLOW', '10.0.0.0/33'],
    ['METRICS_TOKEN', 'short'],
    ['SHUTDOWN_DRAIN_MS', '5s'],
    ['INGEST_MAX_PENDING', '0'],
    ['INGEST_MAX_WAIT_MS', '2s'],
    ['INGEST_WRITERS', '0'],
    ['INGEST_WRITERS', '9'],
    ['HTTP_MAX_CONNECTIONS', '0'],
    ['HTTP_MAX_PIPELINED', '-1'],
    ['LIVE_MAX_STREAMS', '0'],
    ['LOG_LEVEL', 'verbose'],
  ])('refuses %s=%s with a one-line message naming the variable', (name, value) => {
    const err = configError({ [name]: value });
    const shown = name === 'METRICS_TOKEN' ? '(not shown)' : value;
    expect(err.message).not.toContain('\n');
    expect(err.message.startsWith(`invalid ${name}=${JSON.stringify(shown)}: `)).toBe(true);
    expect(err.message.length).toBeGreaterThan(`invalid ${name}=${JSON.stringify(shown)}: `.length);
  });
});

/** `node --import tsx cloud/src/main.ts` as `npm start` runs it, with its output collected. */
function startProcess(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'cloud/src/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = { stdout: '', stderr: '' };
  child.stdout.on('data', (c: Buffer) => (output.stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output.stderr += c.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  /** Resolves when stdout has a line matching `pattern` (rejects if the process ends first). */
  const line = (pattern: RegExp) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const check = () => {
        const match = pattern.exec(output.stdout);
        if (match) resolve(match);
        return match;
      };
      if (check()) return;
      child.stdout.on('data', check);
      void exited.then((code) => reject(new Error(`exited ${code}: ${output.stderr}`)));
    });
  return { child, output, exited, line };
}

describe('the cloud process', () => {
  it('exits with code 2 and one stderr line naming PORT when PORT=abc', async () => {
    const cloud = startProcess({ PORT: 'abc', DATA_DIR: tempDir() });
    expect(await cloud.exited).toBe(2);
    expect(cloud.output.stderr.endsWith('\n')).toBe(true);
    const lines = cloud.output.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^config error: invalid PORT="abc": /);
    expect(cloud.output.stdout).toBe('');
  });

  it('exits 1 with one stderr line naming the settings to check when the start fails', async () => {
    for (const [env, check] of [
      [{ HOST: 'not a host' }, 'HOST, PORT'],
      [{ DATA_DIR: '/etc/passwd/x' }, 'DATA_DIR, DATABASE_URL'],
    ] as const) {
      const cloud = startProcess({ PORT: '0', MQTT_PORT: '0', DATA_DIR: tempDir(), ...env });
      expect(await cloud.exited).toBe(1);
      const lines = cloud.output.stderr.trimEnd().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^cloud failed to start: .*\\(check ${check}`));
    }
  });

  it('listens on the port the system picks for PORT=0, answers, and exits 0 on SIGTERM', async () => {
    const dataDir = tempDir();
    let cloud: ReturnType<typeof startProcess> | undefined;
    try {
      cloud = startProcess({
        PORT: '0',
        HOST: '127.0.0.1',
        MQTT_PORT: '0',
        DATA_DIR: dataDir,
        LOG_LEVEL: 'silent',
        // The drain on SIGTERM is health.test.ts's subject; here it would only add its 5 s.
        SHUTDOWN_DRAIN_MS: '0',
      });
      const [, port] = await cloud.line(/^cloud listening on \S+ \(HTTP port (\d+)\)$/m);
      expect(Number(port)).toBeGreaterThan(0);
      const url = `http://127.0.0.1:${port}`;
      const answer = await fetch(`${url}/v1/sites`);
      expect(answer.status).toBe(401);
      expect(((await answer.json()) as { error: { code: string } }).error.code).toBe('auth_required');
      expect(answer.headers.get('x-request-id')).toMatch(/^req_/);
      // the embedded default: SQLite in DATA_DIR
      expect(fs.existsSync(path.join(dataDir, 'cloud.db'))).toBe(true);

      cloud.child.kill('SIGTERM');
      expect(await cloud.exited).toBe(0);
      expect(cloud.output.stdout).toContain('SIGTERM: finishing in-flight requests and jobs');
      expect(cloud.output.stderr).toBe('');
      await expect(fetch(`${url}/v1/sites`)).rejects.toThrow();
    } finally {
      // a failed assertion must not leave the process running
      if (cloud && cloud.child.exitCode === null && cloud.child.signalCode === null) {
        cloud.child.kill('SIGKILL');
        await cloud.exited;
      }
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('the derived base URL', () => {
  it('names the port actually listened on when PORT=0, in device ingest URLs and e-mailed links', async () => {
    const { signUp, startTestCloud, linkFromMail } = await import('../helpers/cloud.ts');
    const { createDevice, createSite } = await import('../helpers/fixtures.ts');
    const t = await startTestCloud();
    try {
      const user = await signUp(t, 'ops@example.com');
      const site = await createSite(t, user.token);
      const device = await createDevice(t, user.token, site.id);
      expect(device.ingest_url).toBe(`http://localhost:${t.cloud.port}/v1/ingest`);
      const mail = t.nextMail('ops@example.com');
      await t.http.post('/v1/auth/request', { email: 'ops@example.com' });
      expect(linkFromMail(await mail)).toMatch(
        new RegExp(`^http://localhost:${t.cloud.port}/app/auth/callback\\?t=`),
      );
    } finally {
      await t.stop();
    }
  });

  it('never repeats a password or the metrics token in a config error', () => {
    const smtp = configError({ SMTP_URL: 'smpt://user:S3cretPw@mail:587' }).message;
    expect(smtp).toBe('invalid SMTP_URL="smpt://user:***@mail:587": must be smtp://... or smtps://...');
    const database = configError({ DATABASE_URL: 'mysql://ops:Hunter2@db/x' }).message;
    expect(database).toMatch(/^invalid DATABASE_URL="mysql:\/\/ops:\*\*\*@db\/x": /);
    const metrics = configError({ METRICS_TOKEN: 'tok-en' }).message;
    expect(metrics).toMatch(/^invalid METRICS_TOKEN="\(not shown\)": /);
    for (const message of [smtp, database, metrics]) expect(message).not.toMatch(/S3cretPw|Hunter2|tok-en/);
  });

  it('refuses a BASE_URL with a query, an MQTT_URL without a host, an empty sqlite: path, and a retention past a hundred years', () => {
    expect(configError({ BASE_URL: 'https://x.example/path?q=1' }).message).toMatch(
      /^invalid BASE_URL=.*no \?query/,
    );
    expect(configError({ MQTT_URL: 'mqtts://' }).message).toMatch(/^invalid MQTT_URL=/);
    expect(configError({ DATABASE_URL: 'sqlite:' }).message).toMatch(/^invalid DATABASE_URL=/);
    expect(configError({ RETENTION_DAYS: '999999999' }).message).toMatch(/^invalid RETENTION_DAYS=/);
    expect(loadConfig({ RETENTION_DAYS: '36500', BASE_URL: 'https://x.example/' }).retentionDays).toBe(
      36_500,
    );
  });

  it('refuses ports that are not plain decimal numbers', () => {
    for (const PORT of ['0x50', '1e3', '80.0', '-1', '65536']) {
      expect(() => loadConfig({ PORT })).toThrow(/^invalid PORT=/);
    }
  });
});
