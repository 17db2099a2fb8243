import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from '@jest/globals';
import { SystemClock } from '../../../cloud/src/clock.ts';
import { ConfigError, loadConfig } from '../../../cloud/src/config.ts';
import { createLogger } from '../../../cloud/src/logger.ts';
import { createCertificateAuthority, CertificateAuthority } from '../../../cloud/src/pki/certificates.ts';
import { BridgePki, type PkiConfig } from '../../../cloud/src/pki/pki.ts';
import { openDatabase, type Database, type Db } from '../../../cloud/src/storage/database.ts';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, tempDir, testDatabase, type DbKind, type TestDatabase } from '../../helpers/databases.ts';
import { createSite } from '../../helpers/fixtures.ts';
import { closeClient, connectBridge, createBridge } from '../../helpers/mqtt.ts';

const run = promisify(execFile);
const log = createLogger('silent');
const dirs: string[] = [];
const clouds: TestCloud[] = [];
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const t of clouds.splice(0)) await t.stop();
  for (const c of cleanups.splice(0)) await c();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function dir(): string {
  const d = tempDir('sm-pki-');
  dirs.push(d);
  return d;
}

/** A fresh, migrated database of `kind`, closed and removed after the test. */
async function freshDb(kind: DbKind): Promise<{ database: Database; test: TestDatabase }> {
  const test = testDatabase(kind);
  const database = await openDatabase(test.url, { schema: test.schema });
  cleanups.push(async () => {
    await database.close();
    await test.dispose();
  });
  return { database, test };
}

function pkiIn(base: string, db: Db, overrides: Partial<PkiConfig> = {}): BridgePki {
  return new BridgePki({
    config: {
      dir: path.join(base, 'pki'),
      caCertFile: null,
      caKeyFile: null,
      serverCertFile: null,
      serverKeyFile: null,
      serverHosts: ['localhost', '127.0.0.1', '::1'],
      ...overrides,
    },
    clock: new SystemClock(),
    log,
    db,
  });
}

async function storedNames(db: Db): Promise<string[]> {
  const rows = await db.selectFrom('pki_keys').select('name').orderBy('name').execute();
  return rows.map((r) => r.name);
}

async function writeCa(base: string): Promise<{ cert: string; key: string; ca: CertificateAuthority }> {
  const made = await createCertificateAuthority({ commonName: 'Operator CA', now: new Date(), days: 365 });
  const cert = path.join(base, 'op-ca.crt');
  const key = path.join(base, 'op-ca.key');
  fs.writeFileSync(cert, made.certPem);
  fs.writeFileSync(key, made.keyPem);
  return { cert, key, ca: await CertificateAuthority.load(made) };
}

describe.each(DATABASES)('the bridge PKI kept in the database (%s)', (kind) => {
  it('creates its CA and server certificate at first start, writes no files, and every later start reuses them', async () => {
    const base = dir();
    const { database } = await freshDb(kind);
    const first = pkiIn(base, database.db);
    await first.start();
    expect(fs.existsSync(path.join(base, 'pki'))).toBe(false);
    expect(await storedNames(database.db)).toEqual(['ca', 'server']);
    const ca = new X509Certificate(first.caPem);
    const server = new X509Certificate(first.serverPair.certPem);
    expect(ca.ca).toBe(true);
    expect(server.checkIssued(ca)).toBe(true);
    expect(server.subjectAltName).toBe('DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');
    fs.writeFileSync(path.join(base, 'ca.crt'), first.caPem);
    fs.writeFileSync(path.join(base, 'server.crt'), first.serverPair.certPem);
    const verified = await run('openssl', [
      'verify',
      '-purpose',
      'sslserver',
      '-CAfile',
      path.join(base, 'ca.crt'),
      path.join(base, 'server.crt'),
    ]);
    expect(verified.stdout).toMatch(/OK/);

    // Another replica: another data directory, the same database.
    const second = pkiIn(dir(), database.db);
    await second.start();
    expect(second.caPem).toBe(first.caPem);
    expect(second.serverPair.certPem).toBe(first.serverPair.certPem);
  });

  it('makes one CA when several processes start together on a fresh database', async () => {
    const { database } = await freshDb(kind);
    const replicas = [0, 1, 2, 3].map(() => pkiIn(dir(), database.db));
    await Promise.all(replicas.map((p) => p.start()));
    expect(new Set(replicas.map((p) => p.caPem)).size).toBe(1);
    const rows = await database.db.selectFrom('pki_keys').selectAll().where('name', '=', 'ca').execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]!.cert_pem).toBe(replicas[0]!.caPem);
    // Every replica's server certificate is the shared CA's, whichever of them was stored last.
    const ca = new X509Certificate(replicas[0]!.caPem);
    for (const p of replicas) expect(new X509Certificate(p.serverPair.certPem).checkIssued(ca)).toBe(true);
  });

  it('issues a new server certificate naming the stored hosts and an added one, keeping the CA', async () => {
    const { database } = await freshDb(kind);
    const first = pkiIn(dir(), database.db);
    await first.start();
    const second = pkiIn(dir(), database.db, { serverHosts: ['mqtt.example.com', 'localhost'] });
    await second.start();
    expect(second.caPem).toBe(first.caPem);
    expect(new X509Certificate(second.serverPair.certPem).subjectAltName).toBe(
      'DNS:mqtt.example.com, DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1',
    );
    // The first replica's hosts are covered now: its next start keeps the stored certificate.
    const again = pkiIn(dir(), database.db);
    await again.start();
    expect(again.serverPair.certPem).toBe(second.serverPair.certPem);
  });

  it('moves a CA that an earlier installation left in $DATA_DIR/pki into the database', async () => {
    const base = dir();
    const old = await createCertificateAuthority({ commonName: 'Earlier CA', now: new Date(), days: 365 });
    fs.mkdirSync(path.join(base, 'pki'));
    fs.writeFileSync(path.join(base, 'pki', 'ca.crt'), old.certPem);
    fs.writeFileSync(path.join(base, 'pki', 'ca.key'), old.keyPem);
    const { database } = await freshDb(kind);
    const pki = pkiIn(base, database.db);
    await pki.start();
    expect(pki.caPem).toBe(old.certPem);
    const elsewhere = pkiIn(dir(), database.db);
    await elsewhere.start();
    expect(elsewhere.caPem).toBe(old.certPem);
  });

  it('accepts on replica B a bridge certificate issued through replica A, with no operator step', async () => {
    const test = testDatabase(kind);
    cleanups.push(() => test.dispose());
    // Each with its own data directory. On PostgreSQL both start together on the fresh database; a
    // SQLite file is one machine's, and two clouds in one test process would wait on each other's
    // file lock synchronously, so there they start one after the other.
    const start = () => startTestCloud({ replicaOf: test, mqtt: true });
    if (kind === 'postgres') {
      for (const s of await Promise.allSettled([start(), start()]))
        if (s.status === 'fulfilled') clouds.push(s.value);
      if (clouds.length < 2) throw new Error('a replica did not start');
    } else {
      clouds.push(await start());
      clouds.push(await start());
    }
    const [ra, rb] = clouds;
    // Replica B may claim the sign-in mail's job: the code is read from either's mail.
    const user = await signUp(ra!, 'replicas@example.com', [rb!]);
    const bundle = await createBridge(ra!, user.token, (await createSite(ra!, user.token)).id);
    expect(bundle.ca_pem).toBe(rb!.cloud.services.pki.caPem);
    const client = await connectBridge(rb!, bundle);
    await closeClient(client);
  });
});

describe('the bridge PKI in configured files', () => {
  it('uses a configured CA, and a configured server certificate it issued', async () => {
    const base = dir();
    const op = await writeCa(base);
    const server = await op.ca.issueServer({ hosts: ['127.0.0.1'], now: new Date(), days: 30 });
    fs.writeFileSync(path.join(base, 'srv.crt'), server.certPem);
    fs.writeFileSync(path.join(base, 'srv.key'), server.keyPem);
    const { database } = await freshDb('sqlite');
    const pki = pkiIn(base, database.db, {
      caCertFile: op.cert,
      caKeyFile: op.key,
      serverCertFile: path.join(base, 'srv.crt'),
      serverKeyFile: path.join(base, 'srv.key'),
    });
    await pki.start();
    expect(pki.caPem).toBe(fs.readFileSync(op.cert, 'utf8'));
    expect(pki.serverPair.certPem).toBe(server.certPem);
    expect(fs.existsSync(path.join(base, 'pki'))).toBe(false);
    expect(await storedNames(database.db)).toEqual([]);
  });

  it('refuses, with a clear message, a CA key that is not the CA certificate’s, a server certificate of another CA, and unreadable files', async () => {
    const base = dir();
    const { db } = (await freshDb('sqlite')).database;
    const a = await writeCa(base);
    const other = await createCertificateAuthority({ commonName: 'Other', now: new Date(), days: 30 });
    fs.writeFileSync(path.join(base, 'other.key'), other.keyPem);
    await expect(
      pkiIn(base, db, { caCertFile: a.cert, caKeyFile: path.join(base, 'other.key') }).start(),
    ).rejects.toThrow('the service CA cannot be used: the CA key does not belong to the CA certificate');

    const foreignServer = await (
      await CertificateAuthority.load(other)
    ).issueServer({ hosts: ['localhost'], now: new Date(), days: 30 });
    fs.writeFileSync(path.join(base, 'srv.crt'), foreignServer.certPem);
    fs.writeFileSync(path.join(base, 'srv.key'), foreignServer.keyPem);
    await expect(
      pkiIn(base, db, {
        caCertFile: a.cert,
        caKeyFile: a.key,
        serverCertFile: path.join(base, 'srv.crt'),
        serverKeyFile: path.join(base, 'srv.key'),
      }).start(),
    ).rejects.toThrow(/is not issued by the service CA/);

    await expect(
      pkiIn(base, db, { caCertFile: path.join(base, 'missing.crt'), caKeyFile: a.key }).start(),
    ).rejects.toThrow(/cannot read the CA certificate .*missing\.crt/);
    fs.writeFileSync(path.join(base, 'leaf-as-ca.crt'), foreignServer.certPem);
    await expect(
      pkiIn(base, db, { caCertFile: path.join(base, 'leaf-as-ca.crt'), caKeyFile: a.key }).start(),
    ).rejects.toThrow(/is not a CA/);
  });

  it('wants both files of a pair in the configuration', () => {
    expect(() => loadConfig({ PKI_CA_CERT_FILE: '/x/ca.crt' })).toThrow(ConfigError);
    expect(() => loadConfig({ MQTT_TLS_KEY_FILE: '/x/srv.key' })).toThrow(
      'invalid MQTT_TLS_KEY_FILE="/x/srv.key": set MQTT_TLS_CERT_FILE too (they are a pair)',
    );
    expect(() => loadConfig({ MQTT_URL: 'https://x' })).toThrow(/MQTT_URL/);
    expect(
      loadConfig({ MQTT_URL: 'mqtts://mqtt.example.com:8883', BASE_URL: 'https://api.example.com' }).pki
        .serverHosts,
    ).toEqual(['mqtt.example.com', 'api.example.com', 'localhost', '127.0.0.1', '::1']);
  });

  it('serves the bridge with an operator CA end to end: its bridges connect, and the bundle carries that CA', async () => {
    const base = dir();
    const op = await writeCa(base);
    const t = await startTestCloud({
      mqtt: true,
      env: { PKI_CA_CERT_FILE: op.cert, PKI_CA_KEY_FILE: op.key },
    });
    clouds.push(t);
    const user = await signUp(t, 'ops@example.com');
    const bundle = await createBridge(t, user.token, (await createSite(t, user.token)).id);
    expect(bundle.ca_pem).toBe(fs.readFileSync(op.cert, 'utf8'));
    const client = await connectBridge(t, bundle);
    await closeClient(client);
  });

  it('fails the cloud start when the configured CA cannot be used', async () => {
    const base = dir();
    fs.writeFileSync(path.join(base, 'bad.crt'), 'not a certificate');
    fs.writeFileSync(path.join(base, 'bad.key'), 'not a key');
    await expect(
      startTestCloud({
        mqtt: true,
        env: { PKI_CA_CERT_FILE: path.join(base, 'bad.crt'), PKI_CA_KEY_FILE: path.join(base, 'bad.key') },
      }),
    ).rejects.toThrow('the service CA cannot be used: the CA certificate is not a PEM X.509 certificate');
  });
});
