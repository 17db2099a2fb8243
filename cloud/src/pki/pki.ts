import fs from 'node:fs';
import path from 'node:path';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../storage/database.ts';
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
  /**
   * `$DATA_DIR/pki`: where installations from before the shared PKI kept the generated CA; a CA
   * found there is moved into the database at the first start on an empty `pki_keys`.
   */
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

/** A CA left in `$DATA_DIR/pki/` by an installation from before the CA lived in the database. */
function caInDirectory(dir: string): KeyAndCertificate | null {
  const certFile = path.join(dir, 'ca.crt');
  const keyFile = path.join(dir, 'ca.key');
  if (!fs.existsSync(certFile) || !fs.existsSync(keyFile)) return null;
  return { certPem: readPem(certFile, 'CA certificate'), keyPem: readPem(keyFile, 'CA key') };
}

/**
 * The bridge's PKI: the service CA (configured files, or made at first start and kept in the
 * database's `pki_keys`, so every replica on one database serves with one CA), the TLS server
 * certificate (configured, or kept there too), and client certificates for new bridges. `start()`
 * does the I/O.
 */
export class BridgePki {
  private ca: CertificateAuthority | null = null;
  private server: KeyAndCertificate | null = null;
  private starting: Promise<void> | null = null;

  constructor(private readonly deps: { config: PkiConfig; clock: Clock; log: Logger; db: Db }) {}

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
      : await this.sharedCa();
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
      this.server = await this.sharedServer(this.ca);
    }
  }

  /**
   * Issues the server certificate again when it nears its end (or takes the one another replica
   * issued meanwhile); answers the pair when it changed, null otherwise. An operator's own
   * certificate files are the operator's to renew.
   */
  async renewServer(): Promise<KeyAndCertificate | null> {
    const { ca, server } = this.loaded;
    if (this.deps.config.serverCertFile) return null;
    const now = await this.sharedServer(ca);
    if (now.certPem === server.certPem) return null;
    this.server = now;
    return now;
  }

  private now(): Date {
    return new Date(Math.floor(this.deps.clock.nowMicros() / 1000));
  }

  private async stored(name: 'ca' | 'server'): Promise<KeyAndCertificate | null> {
    const row = await this.deps.db
      .selectFrom('pki_keys')
      .select(['cert_pem', 'key_pem'])
      .where('name', '=', name)
      .executeTakeFirst();
    return row ? { certPem: row.cert_pem, keyPem: row.key_pem } : null;
  }

  /**
   * The CA in the database; made (or moved from `$DATA_DIR/pki/`) when there is none. Processes
   * starting together on a fresh database may each make one: the first insert wins and every process
   * reads the winner's back, so one CA serves them all.
   */
  private async sharedCa(): Promise<KeyAndCertificate> {
    const found = await this.stored('ca');
    if (found) return found;
    const { dir } = this.deps.config;
    const old = caInDirectory(dir);
    const candidate =
      old ??
      (await createCertificateAuthority({
        commonName: 'Sensor Monitoring MQTT bridge CA',
        now: this.now(),
        days: CA_DAYS,
      }));
    await this.deps.db
      .insertInto('pki_keys')
      .values({
        name: 'ca',
        cert_pem: candidate.certPem,
        key_pem: candidate.keyPem,
        updated_at: this.deps.clock.nowMicros(),
      })
      .onConflict((oc) => oc.column('name').doNothing())
      .execute();
    const winner = await this.stored('ca');
    if (!winner) throw new PkiError('the service CA was stored but cannot be read back');
    if (winner.certPem === candidate.certPem) {
      this.deps.log.info(
        old ? { from: dir } : {},
        old ? 'moved the MQTT bridge CA into the database' : 'created the MQTT bridge CA',
      );
    }
    return winner;
  }

  /**
   * The server certificate in the database, issued again when it nears its end or misses a host
   * name this process is configured for; a new one names the stored one's hosts too, so replicas with
   * different host lists converge on one certificate instead of replacing each other's.
   */
  private async sharedServer(ca: CertificateAuthority): Promise<KeyAndCertificate> {
    const { serverHosts } = this.deps.config;
    const found = await this.stored('server');
    let hosts = serverHosts;
    if (found && (await ca.issuedThis(found.certPem))) {
      const about = describeCertificate(found.certPem);
      const fresh = about.notAfter.getTime() - this.now().getTime() > RENEW_BEFORE_DAYS * 24 * 3600 * 1000;
      if (fresh && serverHosts.every((h) => about.hosts.includes(h))) return found;
      hosts = [...new Set([...serverHosts, ...(fresh ? about.hosts : [])])];
    }
    const made = await ca.issueServer({ hosts, now: this.now(), days: SERVER_DAYS });
    const row = { cert_pem: made.certPem, key_pem: made.keyPem, updated_at: this.deps.clock.nowMicros() };
    await this.deps.db
      .insertInto('pki_keys')
      .values({ name: 'server', ...row })
      .onConflict((oc) => oc.column('name').doUpdateSet(row))
      .execute();
    this.deps.log.info({ hosts, not_after: made.notAfter }, 'issued the MQTT server certificate');
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
