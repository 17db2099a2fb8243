import fs from 'node:fs';
import path from 'node:path';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import {
  CertificateAuthority,
  createCertificateAuthority,
  describeCertificate,
  type IssuedCertificate,
  type KeyAndCertificate,
} from './certificates.ts';

/** Validity of what the cloud makes itself. */
export const CA_DAYS = 20 * 365;
export const SERVER_DAYS = 2 * 365;
export const BRIDGE_DAYS = 5 * 365;
/** A generated server certificate this close to its end is replaced at start. */
const RENEW_BEFORE_DAYS = 30;

export interface PkiConfig {
  /** `$DATA_DIR/pki`: where the generated CA and server certificate live. */
  dir: string;
  /** Operator-provided CA (both or neither). */
  caCertFile: string | null;
  caKeyFile: string | null;
  /** Operator-provided server certificate and key (both or neither), issued by the CA. */
  serverCertFile: string | null;
  serverKeyFile: string | null;
  /** Host names and IP addresses the generated server certificate must name. */
  serverHosts: string[];
}

export class PkiError extends Error {}

function readPem(file: string, what: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new PkiError(`cannot read the ${what} ${file}: ${(err as Error).message}`);
  }
}

/** Writes `files` into a fresh directory, then renames it to `dir`; false if `dir` appeared meanwhile. */
function writeDirOnce(dir: string, files: Record<string, { text: string; secret: boolean }>): boolean {
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const tmp = fs.mkdtempSync(`${dir}.tmp-`);
  for (const [name, { text, secret }] of Object.entries(files)) {
    fs.writeFileSync(path.join(tmp, name), text, { mode: secret ? 0o600 : 0o644 });
  }
  try {
    fs.renameSync(tmp, dir);
    return true;
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTEMPTY' || code === 'EEXIST') return false; // another process made it first
    throw err;
  }
}

function replaceFile(file: string, text: string, secret: boolean): void {
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, text, { mode: secret ? 0o600 : 0o644 });
  fs.renameSync(tmp, file);
}

/**
 * The bridge's PKI: the service CA (configured files, or made at first start in `$DATA_DIR/pki/`),
 * the TLS server certificate, and client certificates for new bridges. `start()` does the I/O.
 */
export class BridgePki {
  private ca: CertificateAuthority | null = null;
  private server: KeyAndCertificate | null = null;
  private starting: Promise<void> | null = null;

  constructor(private readonly deps: { config: PkiConfig; clock: Clock; log: Logger }) {}

  /** Loads or creates the CA and server certificate; runs once, later calls share the first. */
  start(): Promise<void> {
    this.starting ??= this.load();
    return this.starting;
  }

  private async load(): Promise<void> {
    const { config } = this.deps;
    const caPair = config.caCertFile
      ? {
          certPem: readPem(config.caCertFile, 'CA certificate'),
          keyPem: readPem(config.caKeyFile!, 'CA key'),
        }
      : await this.generatedCa();
    try {
      this.ca = await CertificateAuthority.load(caPair);
    } catch (err) {
      throw new PkiError(`the service CA cannot be used: ${(err as Error).message}`);
    }
    if (config.serverCertFile) {
      const pair = {
        certPem: readPem(config.serverCertFile, 'server certificate'),
        keyPem: readPem(config.serverKeyFile!, 'server key'),
      };
      if (!(await this.ca.issuedThis(pair.certPem))) {
        throw new PkiError(
          `the server certificate ${config.serverCertFile} is not issued by the service CA: bridges verify the server with that CA`,
        );
      }
      this.server = pair;
    } else {
      this.server = await this.generatedServer(this.ca);
    }
  }

  private now(): Date {
    return new Date(Math.floor(this.deps.clock.nowMicros() / 1000));
  }

  private async generatedCa(): Promise<KeyAndCertificate> {
    const dir = this.deps.config.dir;
    const certFile = path.join(dir, 'ca.crt');
    if (!fs.existsSync(certFile)) {
      const ca = await createCertificateAuthority({
        commonName: 'Sensor Monitoring MQTT bridge CA',
        now: this.now(),
        days: CA_DAYS,
      });
      if (
        writeDirOnce(dir, {
          'ca.crt': { text: ca.certPem, secret: false },
          'ca.key': { text: ca.keyPem, secret: true },
        })
      ) {
        this.deps.log.info({ dir }, 'created the MQTT bridge CA');
      }
    }
    return {
      certPem: readPem(certFile, 'CA certificate'),
      keyPem: readPem(path.join(dir, 'ca.key'), 'CA key'),
    };
  }

  /** The generated server certificate, made again when it nears its end or misses a host name. */
  private async generatedServer(ca: CertificateAuthority): Promise<KeyAndCertificate> {
    const { dir, serverHosts } = this.deps.config;
    const certFile = path.join(dir, 'server.crt');
    const keyFile = path.join(dir, 'server.key');
    if (fs.existsSync(certFile) && fs.existsSync(keyFile)) {
      const pair = { certPem: fs.readFileSync(certFile, 'utf8'), keyPem: fs.readFileSync(keyFile, 'utf8') };
      const about = describeCertificate(pair.certPem);
      const fresh = about.notAfter.getTime() - this.now().getTime() > RENEW_BEFORE_DAYS * 24 * 3600 * 1000;
      const covers = serverHosts.every((h) => about.hosts.includes(h));
      if (fresh && covers && (await ca.issuedThis(pair.certPem))) return pair;
    }
    const made = await ca.issueServer({ hosts: serverHosts, now: this.now(), days: SERVER_DAYS });
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 }); // absent when the CA is the operator's
    replaceFile(keyFile, made.keyPem, true);
    replaceFile(certFile, made.certPem, false);
    this.deps.log.info(
      { hosts: serverHosts, not_after: made.notAfter },
      'issued the MQTT server certificate',
    );
    return made;
  }

  private get loaded(): { ca: CertificateAuthority; server: KeyAndCertificate } {
    if (!this.ca || !this.server) throw new Error('BridgePki.start() has not run');
    return { ca: this.ca, server: this.server };
  }

  /** The CA certificate (PEM): clients verify the server with it, the server verifies clients. */
  get caPem(): string {
    return this.loaded.ca.certPem;
  }

  get serverPair(): KeyAndCertificate {
    return this.loaded.server;
  }

  /** A bridge certificate; loads the CA first when the MQTT listener is disabled in this process. */
  async issueBridge(accountId: string, bridgeId: string): Promise<IssuedCertificate> {
    await this.start();
    return this.loaded.ca.issueClient({ accountId, bridgeId, now: this.now(), days: BRIDGE_DAYS });
  }
}
