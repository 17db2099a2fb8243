import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { tempDir } from '../../helpers/databases.ts';
import { createSite } from '../../helpers/fixtures.ts';
import { createBridge } from '../../helpers/mqtt.ts';

const run = promisify(execFile);

/**
 * The bridge's TLS, checked from outside with Debian's `openssl s_client` and the bridge's own
 * client certificate: TLS 1.2 and 1.3 only, and only forward-secret AEAD cipher suites. The client
 * is told `@SECLEVEL=0` so that it offers the old protocols and weak suites itself: a refusal is the
 * server's.
 */
describe('TLS of the MQTT bridge', () => {
  let t: TestCloud;
  let dir: string;
  let port: number;

  beforeAll(async () => {
    t = await startTestCloud({ mqtt: true });
    const user = await signUp(t, 'tls@example.com');
    const site = await createSite(t, user.token);
    const bundle = await createBridge(t, user.token, site.id);
    dir = tempDir('sm-tls-');
    fs.writeFileSync(path.join(dir, 'cert.pem'), bundle.cert_pem);
    fs.writeFileSync(path.join(dir, 'key.pem'), bundle.key_pem, { mode: 0o600 });
    fs.writeFileSync(path.join(dir, 'ca.pem'), bundle.ca_pem);
    port = t.cloud.mqttPort;
  });

  afterAll(async () => {
    await t?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** One handshake: the protocol and cipher agreed, or null when it failed. */
  async function handshake(args: string[]): Promise<{ protocol: string; cipher: string } | null> {
    const full = [
      's_client',
      '-connect',
      `127.0.0.1:${port}`,
      '-cert',
      path.join(dir, 'cert.pem'),
      '-key',
      path.join(dir, 'key.pem'),
      '-CAfile',
      path.join(dir, 'ca.pem'),
      '-verify_return_error',
      '-brief',
      ...args,
    ];
    // stdin is closed at once, so s_client ends right after the handshake.
    const out = await new Promise<string>((resolve) => {
      const child = execFile('openssl', full, { timeout: 10_000 }, (_err, stdout, stderr) =>
        resolve(`${stdout}\n${stderr}`),
      );
      child.stdin?.end();
    });
    const protocol = /Protocol version: (\S+)/.exec(out)?.[1];
    const cipher = /Ciphersuite: (\S+)/.exec(out)?.[1];
    return protocol && cipher ? { protocol, cipher } : null;
  }

  it('accepts TLS 1.2 and TLS 1.3', async () => {
    expect((await handshake(['-tls1_3']))?.protocol).toBe('TLSv1.3');
    expect((await handshake(['-tls1_2']))?.protocol).toBe('TLSv1.2');
  });

  it('refuses TLS 1.0 and TLS 1.1 even when the client offers them', async () => {
    for (const version of ['-tls1', '-tls1_1']) {
      expect([version, await handshake([version, '-cipher', 'ALL:@SECLEVEL=0'])]).toEqual([version, null]);
    }
  });

  it('refuses RC4, 3DES, NULL, EXPORT, anonymous and CBC suites on TLS 1.2, and CCM on TLS 1.3', async () => {
    for (const cipher of [
      'RC4',
      '3DES',
      'NULL',
      'eNULL',
      'EXPORT',
      'aNULL',
      'DES',
      'MD5',
      'CBC',
      'SHA1',
      'kRSA',
    ]) {
      expect([cipher, await handshake(['-tls1_2', '-cipher', `${cipher}:@SECLEVEL=0`])]).toEqual([
        cipher,
        null,
      ]);
    }
    const ccm = 'TLS_AES_128_CCM_8_SHA256:TLS_AES_128_CCM_SHA256';
    expect(await handshake(['-tls1_3', '-ciphersuites', ccm])).toBeNull();
  });

  it('agrees only forward-secret AEAD suites, whatever the client offers on TLS 1.2', async () => {
    const { stdout } = await run('openssl', ['ciphers', '-tls1_2', 'ALL:COMPLEMENTOFALL:@SECLEVEL=0']);
    const offered = stdout
      .trim()
      .split(':')
      .filter((c) => !c.startsWith('TLS_'));
    expect(offered.length).toBeGreaterThan(20);
    const agreed: string[] = [];
    for (const cipher of offered) {
      const result = await handshake(['-tls1_2', '-cipher', `${cipher}:@SECLEVEL=0`]);
      if (result) agreed.push(result.cipher);
    }
    expect(agreed.length).toBeGreaterThan(0);
    for (const cipher of agreed)
      expect(cipher).toMatch(/^ECDHE-(ECDSA|RSA)-(AES(128|256)-GCM-SHA(256|384)|CHACHA20-POLY1305)$/);
  }, 120_000);
});
