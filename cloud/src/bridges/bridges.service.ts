import { newId } from '../../../shared/ids.ts';
import { topicRoot } from '../../../shared/mqtt.ts';
import { formatSeconds, formatSecondsOrNull } from '../../../shared/time.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { notFound } from '../errors.ts';
import type { UserPrincipal } from '../http/context.ts';
import type { BridgeConnections } from '../mqtt/mqtt-bridge.ts';
import type { IssuedCertificate } from '../pki/certificates.ts';
import type { BridgePki } from '../pki/pki.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';
import type { BridgeRow, BridgesRepository } from './bridges.repository.ts';

export interface CreatedBridge {
  row: BridgeRow;
  certificate: IssuedCertificate;
}

/**
 * MQTT bridges (docs/api/mqtt.md): each is a client certificate for one site of an account,
 * issued once with its key (which is not kept), listed with its live state, and revoked on delete.
 */
export class BridgesService {
  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      pki: BridgePki;
      bridges: BridgesRepository;
      sites: SitesRepository;
      audit: AuditRepository;
      connections: BridgeConnections;
      /** `mqtts://host:port` bridges connect to. */
      mqttUrl: () => string;
    },
  ) {}

  async create(by: UserPrincipal, input: { site_id: string; name: string }): Promise<CreatedBridge> {
    const { db, clock, pki, bridges, sites, audit } = this.deps;
    if (!(await sites.find(db, by.accountId, input.site_id))) throw notFound('site');
    const id = newId('brg');
    const certificate = await pki.issueBridge(by.accountId, id);
    const now = clock.nowMicros();
    const row: BridgeRow = {
      id,
      account_id: by.accountId,
      site_id: input.site_id,
      name: input.name,
      cert_serial: certificate.serial,
      cert_fingerprint: certificate.fingerprint,
      expires_at: certificate.notAfter.getTime() * 1000,
      created_at: now,
      last_seen_at: null,
      revoked_at: null,
    };
    await db.transaction().execute(async (trx) => {
      // Held inside the transaction: the site may be deleted meanwhile (SitesRepository.hold).
      if (!(await sites.hold(trx, by.accountId, input.site_id))) throw notFound('site');
      await bridges.insert(trx, row);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'bridge.created',
        by: by.userId,
        target: id,
        details: { site_id: row.site_id, name: row.name, cert_serial: row.cert_serial },
        ts: now,
      });
    });
    return { row, certificate };
  }

  async get(accountId: string, id: string): Promise<BridgeRow> {
    const row = await this.deps.bridges.find(this.deps.db, accountId, id);
    if (!row) throw notFound('bridge');
    return row;
  }

  /** Revokes the certificate: live connections are dropped now, later ones refused. */
  async revoke(by: UserPrincipal, id: string): Promise<void> {
    const { db, clock, bridges, audit, connections } = this.deps;
    await db.transaction().execute(async (trx) => {
      const row = await bridges.find(trx, by.accountId, id);
      if (!row) throw notFound('bridge');
      const now = clock.nowMicros();
      if (!(await bridges.revoke(trx, id, now))) throw notFound('bridge');
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'bridge.revoked',
        by: by.userId,
        target: id,
        details: { site_id: row.site_id, cert_serial: row.cert_serial },
        ts: now,
      });
    });
    connections.disconnect(id);
  }

  /** The bridges of `rows` connected to any replica now (`view`'s `connected`). */
  connectedAmong(rows: readonly BridgeRow[]): Promise<Set<string>> {
    return this.deps.connections.connectedAmong(rows.map((r) => r.id));
  }

  view(row: BridgeRow, connected: boolean) {
    return {
      id: row.id,
      site_id: row.site_id,
      name: row.name,
      topic_root: topicRoot(row.account_id),
      mqtt_url: this.deps.mqttUrl(),
      cert_serial: row.cert_serial,
      cert_fingerprint: row.cert_fingerprint,
      expires_at: formatSeconds(row.expires_at),
      created_at: formatSeconds(row.created_at),
      connected,
      last_seen_at: formatSecondsOrNull(row.last_seen_at),
    };
  }

  /** The answer of POST /v1/bridges: the bridge and its bundle, the key shown only here. */
  createdView(created: CreatedBridge) {
    return {
      ...this.view(created.row, false),
      cert_pem: created.certificate.certPem,
      key_pem: created.certificate.keyPem,
      ca_pem: this.deps.pki.caPem,
    };
  }
}
