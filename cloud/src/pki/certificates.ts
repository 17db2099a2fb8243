import 'reflect-metadata'; // @peculiar/x509 (through tsyringe) needs the Reflect polyfill loaded first
import { createHash, randomBytes, webcrypto } from 'node:crypto';
import { isIP } from 'node:net';
import * as x509 from '@peculiar/x509';

/**
 * X.509 for the MQTT bridge with @peculiar/x509 (docs/design/mqtt.md, "PKI": why this library):
 * the service CA, the server certificate of the TLS listener and the client certificates of bridges.
 * Keys are ECDSA P-256 (fast to make, accepted by OpenSSL, mbedTLS and Mosquitto); PEM everywhere,
 * private keys as unencrypted PKCS #8.
 */
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY_MS = 24 * 3600 * 1000;

export interface KeyAndCertificate {
  keyPem: string;
  certPem: string;
}

export interface IssuedCertificate extends KeyAndCertificate {
  /** Lower-case hex (as `openssl x509 -serial` prints it, in lower case). */
  serial: string;
  /** SHA-256 of the DER certificate, lower-case hex. */
  fingerprint: string;
  notAfter: Date;
}

/** SHA-256 of a DER certificate, lower-case hex without separators. */
export function fingerprintOf(der: ArrayBuffer | Buffer): string {
  return createHash('sha256')
    .update(Buffer.isBuffer(der) ? der : Buffer.from(der))
    .digest('hex');
}

/** `AB:CD:...` (Node's `fingerprint256`) or any hex form → lower-case hex without separators. */
export function normaliseFingerprint(text: string): string {
  return text.replace(/:/g, '').toLowerCase();
}

/** A positive random serial of 16 bytes (RFC 5280: at most 20 octets, positive). */
function newSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0]! & 0x7f) | 0x40; // positive, and no leading zero nibble to be stripped anywhere
  return bytes.toString('hex');
}

async function newKeys(): Promise<CryptoKeyPair> {
  return await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
}

async function keyPem(key: CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', key);
  return x509.PemConverter.encode(der, 'PRIVATE KEY');
}

/** A CryptoKey from a PKCS #8 PEM (ECDSA P-256 only, the kind this module makes). */
async function importKey(pem: string): Promise<CryptoKey> {
  const der = x509.PemConverter.decode(pem)[0];
  if (!der) throw new Error('no PEM block in the private key');
  try {
    return await webcrypto.subtle.importKey('pkcs8', der, ALGORITHM, true, ['sign']);
  } catch {
    throw new Error('the private key must be an ECDSA P-256 key in PKCS #8 PEM ("BEGIN PRIVATE KEY")');
  }
}

function issued(cert: x509.X509Certificate, keyPemText: string): IssuedCertificate {
  return {
    keyPem: keyPemText,
    certPem: cert.toString('pem'),
    serial: cert.serialNumber.toLowerCase(),
    fingerprint: fingerprintOf(cert.rawData),
    notAfter: cert.notAfter,
  };
}

/** The escaped value of an RDN (RFC 4514) so an account id or a name cannot inject attributes. */
function rdn(value: string): string {
  return value.replace(/([,+"\\<>;=#])/g, '\\$1');
}

/** A self-signed CA that may sign end-entity certificates only (path length 0). */
export async function createCertificateAuthority(options: {
  commonName: string;
  now: Date;
  days: number;
}): Promise<IssuedCertificate> {
  const keys = await newKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: newSerial(),
    name: `CN=${rdn(options.commonName)}`,
    notBefore: new Date(options.now.getTime() - 3600_000),
    notAfter: new Date(options.now.getTime() + options.days * DAY_MS),
    signingAlgorithm: ALGORITHM,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return issued(cert, await keyPem(keys.privateKey));
}

/** The CA as loaded: its certificate and the key that signs with it. */
export class CertificateAuthority {
  private constructor(
    readonly certificate: x509.X509Certificate,
    private readonly key: CryptoKey,
    readonly certPem: string,
  ) {}

  static async load(pair: KeyAndCertificate): Promise<CertificateAuthority> {
    let cert: x509.X509Certificate;
    try {
      cert = new x509.X509Certificate(pair.certPem);
    } catch {
      throw new Error('the CA certificate is not a PEM X.509 certificate');
    }
    const basic = cert.getExtension(x509.BasicConstraintsExtension);
    if (!basic?.ca) throw new Error('the CA certificate is not a CA (basicConstraints CA:TRUE is missing)');
    const key = await importKey(pair.keyPem);
    // The key must belong to the certificate: sign and verify a probe.
    const probe = randomBytes(32);
    const signature = await webcrypto.subtle.sign(ALGORITHM, key, probe);
    const publicKey = (await cert.publicKey.export(ALGORITHM, ['verify'])) as unknown as CryptoKey;
    if (!(await webcrypto.subtle.verify(ALGORITHM, publicKey, signature, probe))) {
      throw new Error('the CA key does not belong to the CA certificate');
    }
    return new CertificateAuthority(cert, key, cert.toString('pem'));
  }

  /** Whether `certPem` was signed by this CA. */
  async issuedThis(certPem: string): Promise<boolean> {
    try {
      const cert = new x509.X509Certificate(certPem);
      return await cert.verify({ publicKey: this.certificate.publicKey, signatureOnly: true });
    } catch {
      return false;
    }
  }

  private async sign(options: {
    subject: string;
    now: Date;
    days: number;
    extensions: x509.Extension[];
  }): Promise<IssuedCertificate> {
    const keys = await newKeys();
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: newSerial(),
      subject: options.subject,
      issuer: this.certificate.subject,
      notBefore: new Date(options.now.getTime() - 3600_000),
      notAfter: new Date(
        Math.min(options.now.getTime() + options.days * DAY_MS, this.certificate.notAfter.getTime()),
      ),
      signingAlgorithm: ALGORITHM,
      publicKey: keys.publicKey,
      signingKey: this.key,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        await x509.AuthorityKeyIdentifierExtension.create(this.certificate),
        ...options.extensions,
      ],
    });
    return issued(cert, await keyPem(keys.privateKey));
  }

  /** The TLS server certificate; `hosts` become DNS or IP subject alternative names. */
  async issueServer(options: { hosts: string[]; now: Date; days: number }): Promise<IssuedCertificate> {
    const names = options.hosts.map((h) => ({
      type: isIP(h) ? ('ip' as const) : ('dns' as const),
      value: h,
    }));
    return this.sign({
      subject: `CN=${rdn(options.hosts[0] ?? 'localhost')}`,
      now: options.now,
      days: options.days,
      extensions: [
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension(names),
      ],
    });
  }

  /** A bridge's client certificate: CN = the account (the topic root), OU = the bridge. */
  async issueClient(options: {
    accountId: string;
    bridgeId: string;
    now: Date;
    days: number;
  }): Promise<IssuedCertificate> {
    return this.sign({
      subject: `CN=${rdn(options.accountId)}, OU=${rdn(options.bridgeId)}`,
      now: options.now,
      days: options.days,
      extensions: [new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth])],
    });
  }
}

/** Reads the first certificate of a PEM text: its fingerprint, notAfter and SANs (for start-up checks). */
export function describeCertificate(pem: string): {
  fingerprint: string;
  notAfter: Date;
  hosts: string[];
} {
  const cert = new x509.X509Certificate(pem);
  const san = cert.getExtension(x509.SubjectAlternativeNameExtension);
  return {
    fingerprint: fingerprintOf(cert.rawData),
    notAfter: cert.notAfter,
    hosts: san ? san.names.items.map((n) => n.value) : [],
  };
}
