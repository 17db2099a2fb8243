import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** A throwaway CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl. */
export interface TestPki {
  dir: string;
  caPem: string;
  serverCertPem: string;
  serverKeyPem: string;
  clientCertPem: string;
  clientKeyPem: string;
  /** The client certificate's CN: the account id, as the cloud's bridge issues it. */
  accountId: string;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

function keyAndCsr(dir: string, name: string, cn: string): void {
  openssl(dir, [
    'req',
    '-new',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.csr`,
    '-subj',
    `/CN=${cn}`,
  ]);
}

export function makePki(dir: string, accountId = 'acc_gatewaytest', caName = 'Test CA'): TestPki {
  fs.mkdirSync(dir, { recursive: true });
  openssl(dir, [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    `/CN=${caName}`,
  ]);
  fs.writeFileSync(path.join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  keyAndCsr(dir, 'server', '127.0.0.1');
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.pem',
    '-days',
    '2',
    '-extfile',
    'server.ext',
  ]);
  keyAndCsr(dir, 'client', accountId);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    'client.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'client.pem',
    '-days',
    '2',
  ]);
  const read = (f: string) => fs.readFileSync(path.join(dir, f), 'utf8');
  return {
    dir,
    caPem: read('ca.pem'),
    serverCertPem: read('server.pem'),
    serverKeyPem: read('server.key'),
    clientCertPem: read('client.pem'),
    clientKeyPem: read('client.key'),
    accountId,
  };
}

/** The bundle file an installer saves from `POST /v1/bridges`, for this PKI and a bridge URL. */
export function writeBundle(file: string, pki: TestPki, mqttUrl: string): void {
  fs.writeFileSync(
    file,
    JSON.stringify({
      id: 'brg_test',
      topic_root: `service/${pki.accountId}/`,
      mqtt_url: mqttUrl,
      cert_pem: pki.clientCertPem,
      key_pem: pki.clientKeyPem,
      ca_pem: pki.caPem,
    }),
  );
}
