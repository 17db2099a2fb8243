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
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { tempDir } from '../../helpers/databases.ts';
import { createSite } from '../../helpers/fixtures.ts';
import { closeClient, connectBridge, createBridge } from '../../helpers/mqtt.ts';

const run = promisify(execFile);
const log = createLogger('silent');
const dirs: string[] = [];
const clouds: TestCloud[] = [];

afterEach(async () => {
  for (const t of clouds.splice(0)) await t.stop();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function dir(): string {
  const d = tempDir('sm-pki-');
  dirs.push(d);
  return d;
}

function pkiIn(base: string, overrides: Partial<PkiConfig> = {}): BridgePki {
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
  });
}

async function writeCa(base: string): Promise<{ cert: string; key: string; ca: CertificateAuthority }> {
  const made = await createCertificateAuthority({ commonName: 'Operator CA', now: new Date(), days: 365 });
  const cert = path.join(base, 'op-ca.crt');
  const key = path.join(base, 'op-ca.key');
  fs.writeFileSync(cert, made.certPem);
  fs.writeFileSync(key, made.keyPem);
  return { cert, key, ca: await CertificateAuthority.load(made) };
}

describe('the bridge PKI', () => {
  it('creates its CA and server certificate in $DATA_DIR/pki at first start, keys private, and reuses them', async () => {
    const base = dir();
    const first = pkiIn(base);
    await first.start();
    const files = fs.readdirSync(path.join(base, 'pki')).sort();
    expect(files).toEqual(['ca.crt', 'ca.key', 'server.crt', 'server.key']);
    for (const key of ['ca.key', 'server.key']) {
      expect(fs.statSync(path.join(base, 'pki', key)).mode & 0o777).toBe(0o600);
    }
    const ca = new X509Certificate(first.caPem);
    const server = new X509Certificate(first.serverPair.certPem);
    expect(ca.ca).toBe(true);
    expect(server.checkIssued(ca)).toBe(true);
    expect(server.subjectAltName).toBe('DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');
    const verified = await run('openssl', [
      'verify',
      '-purpose',
      'sslserver',
      '-CAfile',
      path.join(base, 'pki', 'ca.crt'),
      path.join(base, 'pki', 'server.crt'),
    ]);
    expect(verified.stdout).toMatch(/OK/);

    const second = pkiIn(base);
    await second.start();
    expect(second.caPem).toBe(first.caPem);
    expect(second.serverPair.certPem).toBe(first.serverPair.certPem);
  });

  it('issues a new server certificate when a host name is added, keeping the CA', async () => {
    const base = dir();
    const first = pkiIn(base);
    await first.start();
    const second = pkiIn(base, { serverHosts: ['mqtt.example.com', 'localhost'] });
    await second.start();
    expect(second.caPem).toBe(first.caPem);
    expect(new X509Certificate(second.serverPair.certPem).subjectAltName).toBe(
      'DNS:mqtt.example.com, DNS:localhost',
    );
  });

  it('uses a configured CA, and a configured server certificate it issued', async () => {
    const base = dir();
    const op = await writeCa(base);
    const server = await op.ca.issueServer({ hosts: ['127.0.0.1'], now: new Date(), days: 30 });
    fs.writeFileSync(path.join(base, 'srv.crt'), server.certPem);
    fs.writeFileSync(path.join(base, 'srv.key'), server.keyPem);
    const pki = pkiIn(base, {
      caCertFile: op.cert,
      caKeyFile: op.key,
      serverCertFile: path.join(base, 'srv.crt'),
      serverKeyFile: path.join(base, 'srv.key'),
    });
    await pki.start();
    expect(pki.caPem).toBe(fs.readFileSync(op.cert, 'utf8'));
    expect(pki.serverPair.certPem).toBe(server.certPem);
    expect(fs.existsSync(path.join(base, 'pki'))).toBe(false);
  });

  it('refuses, with a clear message, a CA key that is not the CA certificate’s, a server certificate of another CA, and unreadable files', async () => {
    const base = dir();
    const a = await writeCa(base);
    const other = await createCertificateAuthority({ commonName: 'Other', now: new Date(), days: 30 });
    fs.writeFileSync(path.join(base, 'other.key'), other.keyPem);
    await expect(
      pkiIn(base, { caCertFile: a.cert, caKeyFile: path.join(base, 'other.key') }).start(),
    ).rejects.toThrow('the service CA cannot be used: the CA key does not belong to the CA certificate');

    const foreignServer = await (
      await CertificateAuthority.load(other)
    ).issueServer({ hosts: ['localhost'], now: new Date(), days: 30 });
    fs.writeFileSync(path.join(base, 'srv.crt'), foreignServer.certPem);
    fs.writeFileSync(path.join(base, 'srv.key'), foreignServer.keyPem);
    await expect(
      pkiIn(base, {
        caCertFile: a.cert,
        caKeyFile: a.key,
        serverCertFile: path.join(base, 'srv.crt'),
        serverKeyFile: path.join(base, 'srv.key'),
      }).start(),
    ).rejects.toThrow(/is not issued by the service CA/);

    await expect(
      pkiIn(base, { caCertFile: path.join(base, 'missing.crt'), caKeyFile: a.key }).start(),
    ).rejects.toThrow(/cannot read the CA certificate .*missing\.crt/);
    fs.writeFileSync(path.join(base, 'leaf-as-ca.crt'), foreignServer.certPem);
    await expect(
      pkiIn(base, { caCertFile: path.join(base, 'leaf-as-ca.crt'), caKeyFile: a.key }).start(),
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
