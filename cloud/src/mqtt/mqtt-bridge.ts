import { randomUUID } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import { Aedes, type AedesPublishPacket, type Client, type PublishPacket, type Subscription } from 'aedes';
import {
  commandTopic,
  InfoPayload,
  LwtPayload,
  MAX_PACKET_BYTES,
  parseTopic,
  ReasonCode,
  topicRoot,
  type CommandName,
} from '../../../shared/mqtt.ts';
import { IngestValidationError, validateIngestBody } from '../../../shared/ingest.ts';
import { formatSeconds } from '../../../shared/time.ts';
import type { BridgeDevices, BridgeIdentity } from '../bridges/bridge-devices.ts';
import type { BridgesRepository } from '../bridges/bridges.repository.ts';
import type { Clock } from '../clock.ts';
import type { RedisSettings } from '../config.ts';
import { ApiError, Forbidden, InvalidRequest, Overloaded } from '../errors.ts';
import { toApiError } from '../ingest/ingest.core.ts';
import type { Ingest } from '../ingest/ingest.types.ts';
import type { IngestItem } from '../ingest/ingest.types.ts';
import type { NotificationHub } from '../hub/notification-hub.ts';
import type { Logger } from '../logger.ts';
import type { BridgePki } from '../pki/pki.ts';
import { isConnectionError, type Db } from '../storage/database.ts';
import type { DatabaseOutageLog } from '../storage/outage-log.ts';
import {
  answerPublish,
  brokerPersistence,
  capQos,
  guardSubscriptionNames,
  IncomingQos2,
  isMosquittoBridgeNotification,
  isQos2Retransmission,
  isWill,
  isWillOfStoppedBroker,
  keepResumableSession,
  peerOf,
  pruneStoredSubscriptions,
  refuseUnlessMqtt5,
  releaseForLaterAnswer,
  rememberPeer,
  scopeClientId,
  storeOnlyAllowedSubscriptions,
  stripWillDelay,
  tagWill,
  willClientId,
  willFingerprint,
} from './aedes-compat.ts';
import { clusterPieces, type ClusterPieces } from './cluster.ts';
import { ReceiveTimes } from './receive-times.ts';
import { publishAnswerFor } from './reason-codes.ts';

/** Session Expiry given to clients that resume sessions without naming one (Mosquitto bridges). */
export const BRIDGE_SESSION_SECONDS = 3600;
/**
 * The longest Session Expiry a client is granted (a longer one, "never" included, is cut to this and
 * the CONNACK says so): a session the client never comes back to holds its subscriptions and queued
 * downlinks (which expire after IDENTIFY_SECONDS anyway) for a day at most.
 */
export const MAX_SESSION_SECONDS = 86_400;
/** How often the server certificate's end is looked at (it is renewed 30 days before it). */
const RENEW_CHECK_MS = 24 * 3600 * 1000;
/**
 * How often live connections are checked against revocations (a revocation normally arrives at
 * once through the hub; this catches one sent while the notify channel was down) and their presence
 * refreshed.
 */
const SWEEP_MS = 15_000;
/** A presence row not refreshed for this long belongs to a process that died: the bridge is not connected there. */
export const PRESENCE_STALE_MS = 3 * SWEEP_MS;
/** The hub topic of bridge revocations, heard by every replica's bridge endpoint. */
const BRIDGES_TOPIC = 'bridges';
/** Identify makes the LED blink this long (docs/api/resources.md). */
export const IDENTIFY_SECONDS = 30;
/**
 * QoS 1 publishes of one connection that may wait for their commit while aedes reads the next ones;
 * beyond this, a publish holds aedes' callback until it is answered, and aedes stops reading that
 * socket (TCP flow control) until then.
 */
export const MAX_UNANSWERED_PER_CONNECTION = 1024;

/** What happens to one PUBLISH once it has been handled. */
type Decision =
  /** committed (or a QoS 2 retransmission): aedes acknowledges with 0x00 */
  | { kind: 'ack' }
  /** answered with this reason code; nothing stored */
  | { kind: 'answer'; reasonCode: number; reasonString: string | null }
  /** outside the account's root: aedes' own 0x87 (the connection stays up) */
  | { kind: 'refuse'; reason: string };

interface Connection {
  identity: BridgeIdentity;
  /** Answers go out in the order the PUBLISHes came (MQTT-4.6.0-2), even though they run in parallel. */
  tail: Promise<void>;
  /** QoS 1 publishes released to aedes (`releaseForLaterAnswer`) and not answered yet. */
  unanswered: number;
}

/** What the device routes and the bridges service need to know about live connections. */
export interface BridgeConnections {
  /** Of `ids`, the bridges connected to any replica now. */
  connectedAmong(ids: readonly string[]): Promise<Set<string>>;
  /**
   * Drops the bridge's live connections at once (DISCONNECT 0x87) on every replica and refuses it
   * from now on; called after the revocation committed.
   */
  disconnect(bridgeId: string): void;
  /** Publishes a downlink to the bridges of the device's site; false when none is connected. */
  sendCommand(
    device: { accountId: string; siteId: string; localId: string },
    command: CommandName,
    payload: unknown,
  ): Promise<boolean>;
}

function authError(message: string, returnCode: 3 | 5): Error & { returnCode: number } {
  return Object.assign(new Error(message), { returnCode });
}

/**
 * The MQTT 5 bridge endpoint: aedes on a mutual-TLS server. A connection is a bridge,
 * known by its client certificate; it may publish and subscribe under `service/<its account>/`
 * only. Measurements and last-wills go through the one IngestCore, and the PUBACK is sent only after
 * the ingest group committed. aedes specifics live in `aedes-compat.ts`.
 */
/**
 * The bridge's cipher suites: TLS 1.3's three, and on TLS 1.2 only forward-secret (ECDHE) AEAD
 * suites (GCM, ChaCha20-Poly1305), Mozilla's "intermediate" profile. Node's default would also agree
 * CBC and CCM8 suites; every client we serve (mqtt.js, Mosquitto, mbedTLS) speaks GCM.
 * test/cloud/mqtt/tls.test.ts checks it with `openssl s_client`.
 */
const BRIDGE_CIPHERS = [
  'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

export class MqttBridge implements BridgeConnections {
  private broker: Aedes | null = null;
  private cluster: ClusterPieces | null = null;
  private server: tls.Server | null = null;
  private sweep: NodeJS.Timeout | null = null;
  private renewal: NodeJS.Timeout | null = null;
  private stopping: Promise<void> | null = null;
  /** PUBLISH packets received from authenticated bridges since start (read by `GET /metrics`). */
  messagesReceived = 0;
  private readonly identities = new WeakMap<Client, Connection>();
  private readonly byBridge = new Map<string, Set<Client>>();
  private readonly revoked = new Set<string>();
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly receiveTimes = new ReceiveTimes();
  /** aedes' QoS 2 incoming store entries of this process, removed when their session ends. */
  private incomingQos2: IncomingQos2 | null = null;
  /** Connections that asked for Clean Start, until they are registered. */
  private readonly cleanStarts = new WeakSet<Client>();
  /** The connection that holds each client id (its session) now. */
  private readonly sessionHolders = new Map<string, Client>();
  /** This process in `bridge_presence`. */
  private readonly replicaId = randomUUID();
  /** Presence writes, one after the other (a connect and its disconnect must not swap). */
  private presence: Promise<void> = Promise.resolve();

  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      log: Logger;
      pki: BridgePki;
      bridges: BridgesRepository;
      devices: BridgeDevices;
      ingest: Ingest;
      hub: NotificationHub;
      /** The clustered bridge's Redis; null: aedes keeps sessions and routes publishes in this process. */
      redis: RedisSettings | null;
      /** Where publishes and connections refused for a database outage are logged (once per outage). */
      dbOutage?: DatabaseOutageLog;
    },
  ) {
    // Heard even with the listener off: a revoked bridge is then refused if it starts later.
    deps.hub.subscribe(BRIDGES_TOPIC, (message) => {
      if (message.type === 'bridge.revoked' && typeof message.id === 'string') this.dropRevoked(message.id);
    });
  }

  /** Listens on `port` (0: any free port) with the PKI's server certificate and CA. */
  async start(port: number, host: string): Promise<void> {
    const { log, redis } = this.deps;
    const cluster = redis
      ? clusterPieces(redis, (err) => log.error({ err }, 'MQTT bridge: Redis failed'))
      : null;
    this.cluster = cluster;
    const broker = await Aedes.createBroker({
      ...(cluster ? { mq: cluster.mq, persistence: cluster.persistence } : {}),
      maximumPacketSize: MAX_PACKET_BYTES,
      sessionExpiryIntervalLimit: MAX_SESSION_SECONDS,
      preConnect: (client, packet, cb) => {
        guardSubscriptionNames(client);
        const peer = rememberPeer(client);
        if (!peer) return cb(new Error('no verified client certificate'), false);
        scopeClientId(packet, peer);
        tagWill(packet, peer);
        if (packet.clean) this.cleanStarts.add(client);
        if (refuseUnlessMqtt5(packet)) {
          log.info(
            { cn: peer.commonName, fingerprint: peer.fingerprint },
            'MQTT connection refused: not MQTT 5',
          );
        } else if (keepResumableSession(packet, BRIDGE_SESSION_SECONDS)) {
          log.debug({ client_id: packet.clientId }, 'resumable session without expiry: kept for an hour');
        }
        cb(null, true);
      },
      authenticate: (client, _username, _password, done) => {
        this.authenticate(client).then(
          (error) => done(error as never, error === null),
          (err: unknown) => {
            if (this.deps.dbOutage && isConnectionError(err)) this.deps.dbOutage.refused('connection', err);
            else log.error({ err }, 'MQTT authentication failed');
            done(authError('server unavailable', 3), false);
          },
        );
      },
      authorizePublish: (client, packet, cb) => this.authorizePublish(client, packet, cb),
      authorizeSubscribe: (client, sub, cb) => cb(null, this.authorizeSubscribe(client, sub)),
      authorizeForward: (client, packet) => this.authorizeForward(client, packet),
    });
    const persistence = brokerPersistence(broker);
    this.incomingQos2 = new IncomingQos2(persistence);
    storeOnlyAllowedSubscriptions(persistence, (client, sub) => this.mayFilter(client, sub.topic));
    // aedes reports what its persistence failed to do (queue a message for an offline session, wipe
    // an ended session, delete a will, the sweep of a stopped replica's wills) as 'error', which
    // without a listener would end the process. Each failure concerns one message or session.
    (broker as EventEmitter).on('error', (err: unknown) => {
      if (this.deps.dbOutage && isConnectionError(err)) {
        this.deps.dbOutage.refused('background', err, { module: 'mqtt' });
      } else {
        log.error({ err }, 'MQTT broker: session storage failed; the broker goes on');
      }
    });
    broker.on('client', (client) => this.register(client));
    broker.on('clientDisconnect', (client) => this.unregister(client));
    broker.on('sessionExpired', (client) => this.endSession(client.id));
    broker.on('clientError', (client, err) =>
      log.debug(
        {
          client_id: client?.id,
          bridge_id: this.identities.get(client)?.identity.bridgeId,
          err: err.message,
        },
        'MQTT client error',
      ),
    );
    broker.on('connectionError', (_client, err) => log.debug({ err: err.message }, 'MQTT connection error'));
    this.broker = broker;

    const server = tls.createServer(this.tlsContext(), (socket) => broker.handle(socket));
    server.on('tlsClientError', (err: NodeJS.ErrnoException, socket: tls.TLSSocket) =>
      log.info(
        { code: err.code, remote: socket.remoteAddress, err: err.message },
        'MQTT TLS handshake refused',
      ),
    );
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    this.sweep = setInterval(() => void this.sweepConnections(), SWEEP_MS);
    this.sweep.unref();
    this.renewal = setInterval(() => void this.renewServerCertificate(), RENEW_CHECK_MS);
    this.renewal.unref();
    log.info({ port: this.port, clustered: cluster !== null }, 'MQTT bridge listening');
  }

  /** The TLS settings of the listener, with the server certificate the PKI holds now. */
  private tlsContext(): tls.SecureContextOptions & tls.TlsOptions {
    const { pki } = this.deps;
    const { certPem, keyPem } = pki.serverPair;
    return {
      requestCert: true,
      rejectUnauthorized: true,
      ca: [pki.caPem],
      cert: certPem,
      key: keyPem,
      minVersion: 'TLSv1.2',
      maxVersion: 'TLSv1.3',
      ciphers: BRIDGE_CIPHERS,
      honorCipherOrder: true,
    };
  }

  /**
   * Renews the server certificate as it nears its end and serves the new one to the next
   * handshakes (open connections keep theirs): a process running past the certificate's end would
   * otherwise serve an expired one, which every bridge refuses. Run daily; a failure is logged and
   * tried again the next day, weeks before the end.
   */
  async renewServerCertificate(): Promise<boolean> {
    const server = this.server;
    if (!server) return false;
    try {
      if (!(await this.deps.pki.renewServer())) return false;
    } catch (err) {
      this.deps.log.error({ err }, 'MQTT server certificate renewal failed; tried again tomorrow');
      return false;
    }
    server.setSecureContext(this.tlsContext());
    this.deps.log.info('MQTT server certificate renewed: new connections get the new one');
    return true;
  }

  /** MQTT connections of authenticated bridges now open (read by `GET /metrics`). */
  get connectionCount(): number {
    let n = 0;
    for (const clients of this.byBridge.values()) n += clients.size;
    return n;
  }

  get port(): number {
    return (this.server?.address() as AddressInfo | null)?.port ?? 0;
  }

  get listening(): boolean {
    return this.server !== null && !this.stopping;
  }

  /** Stops accepting, disconnects everyone (DISCONNECT 0x8B) and waits for the publishes in progress. */
  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  private async shutdown(): Promise<void> {
    if (this.sweep) clearInterval(this.sweep);
    if (this.renewal) clearInterval(this.renewal);
    const server = this.server;
    const closed = server ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve();
    if (this.broker) {
      const broker = this.broker;
      await new Promise<void>((resolve) => broker.close(() => resolve()));
    }
    await closed;
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    await this.cluster?.close();
    await this.presence;
    await this.deps.bridges
      .absent(this.deps.db, this.replicaId)
      .catch((err: unknown) => this.deps.log.error({ err }, 'could not remove the bridge presence rows'));
  }

  // ---- connections ------------------------------------------------------------------------------

  /** null when the certificate is a live bridge of its CN's account; else the CONNACK error. */
  private async authenticate(client: Client): Promise<(Error & { returnCode: number }) | null> {
    const { db, bridges, log } = this.deps;
    const peer = peerOf(client);
    if (!peer) return authError('no client certificate', 5);
    const bridge = await bridges.findByFingerprint(db, peer.fingerprint);
    const refuse = (why: string) => {
      log.warn(
        { cn: peer.commonName, fingerprint: peer.fingerprint, serial: peer.serial, bridge_id: bridge?.id },
        `MQTT connection refused: ${why}`,
      );
      return authError(why, 5);
    };
    if (!bridge) return refuse('certificate of no bridge');
    if (bridge.revoked_at !== null || this.revoked.has(bridge.id))
      return refuse('bridge deleted (certificate revoked)');
    if (bridge.account_id !== peer.commonName) return refuse('certificate CN is not the bridge account');
    this.identities.set(client, {
      identity: { bridgeId: bridge.id, accountId: bridge.account_id, siteId: bridge.site_id },
      tail: Promise.resolve(),
      unanswered: 0,
    });
    return null;
  }

  private register(client: Client): void {
    const conn = this.identities.get(client);
    if (!conn) return;
    this.sessionHolders.set(client.id, client);
    if (this.cleanStarts.has(client)) this.endSession(client.id);
    else this.pruneSession(client);
    const { bridgeId } = conn.identity;
    if (this.revoked.has(bridgeId)) {
      client.disconnect({ reasonCode: ReasonCode.notAuthorized });
      return;
    }
    let set = this.byBridge.get(bridgeId);
    if (!set) {
      this.byBridge.set(bridgeId, (set = new Set()));
      this.present(bridgeId, true);
    }
    set.add(client);
    this.deps.log.info(
      { bridge_id: bridgeId, account_id: conn.identity.accountId, client_id: client.id },
      'MQTT bridge connected',
    );
    this.touch([bridgeId]);
  }

  private unregister(client: Client): void {
    const conn = this.identities.get(client);
    if (!conn) return;
    if (this.sessionHolders.get(client.id) === client) {
      this.sessionHolders.delete(client.id);
      // Session Expiry 0 (read now: a DISCONNECT may change it): the session ends with the connection.
      if (client.sessionExpiryInterval === 0) this.endSession(client.id);
    }
    const { bridgeId } = conn.identity;
    const set = this.byBridge.get(bridgeId);
    set?.delete(client);
    if (set?.size === 0) {
      this.byBridge.delete(bridgeId);
      this.present(bridgeId, false);
    }
    this.deps.log.info({ bridge_id: bridgeId, client_id: client.id }, 'MQTT bridge disconnected');
    this.touch([bridgeId]);
  }

  /** What this process keeps of a session that ended (Clean Start, expiry, or with its connection). */
  private endSession(clientId: string): void {
    this.receiveTimes.endSession(clientId);
    if (this.incomingQos2) void this.track(this.incomingQos2.clear(clientId));
  }

  /** A resumed session loses the filters this bridge may not subscribe to (`mayFilter`). */
  private pruneSession(client: Client): void {
    const broker = this.broker;
    if (!broker) return;
    this.track(
      pruneStoredSubscriptions(brokerPersistence(broker), client, (c, sub) => this.mayFilter(c, sub.topic)),
    ).then(
      (removed) => {
        if (removed > 0)
          this.deps.log.info(
            { client_id: client.id, removed },
            'refused filters removed from a resumed MQTT session',
          );
      },
      (err: unknown) =>
        this.deps.log.error({ err, client_id: client.id }, 'could not prune a resumed MQTT session'),
    );
  }

  private touch(ids: string[]): void {
    const { db, bridges, clock, log } = this.deps;
    this.track(bridges.touch(db, ids, clock.nowMicros())).catch((err: unknown) =>
      log.error({ err, bridge_ids: ids }, 'could not record bridge last_seen_at'),
    );
  }

  /** Writes that this process holds (or no longer holds) a connection of the bridge, in call order. */
  private present(bridgeId: string, here: boolean): void {
    const { db, bridges, clock, log } = this.deps;
    this.presence = this.presence
      .then(() =>
        here
          ? bridges.present(db, bridgeId, this.replicaId, clock.nowMicros())
          : bridges.absent(db, this.replicaId, bridgeId),
      )
      .catch((err: unknown) => log.error({ err, bridge_id: bridgeId }, 'could not record bridge presence'));
    void this.track(this.presence);
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.inFlight.add(work);
    // The caller handles `work`'s rejection; this derived chain only does the bookkeeping.
    void work.finally(() => this.inFlight.delete(work)).catch(() => undefined);
    return work;
  }

  /**
   * Revocations missed meanwhile, last_seen_at of the bridges that stay connected, this process's
   * presence rows refreshed and those of dead processes removed.
   */
  private async sweepConnections(): Promise<void> {
    const { db, bridges, clock } = this.deps;
    const ids = [...this.byBridge.keys()];
    try {
      const now = clock.nowMicros();
      await bridges.pruneStalePresence(db, now - 10 * PRESENCE_STALE_MS * 1000);
      if (ids.length === 0) return;
      for (const id of await bridges.revokedAmong(db, ids)) this.dropRevoked(id);
      const live = [...this.byBridge.keys()];
      await bridges.refreshPresence(db, live, this.replicaId, now);
      this.touch(live);
    } catch (err) {
      this.deps.log.error({ err }, 'MQTT bridge sweep failed');
    }
  }

  async connectedAmong(ids: readonly string[]): Promise<Set<string>> {
    const { db, bridges, clock } = this.deps;
    return bridges.connectedAmong(db, ids, clock.nowMicros() - PRESENCE_STALE_MS * 1000);
  }

  disconnect(bridgeId: string): void {
    this.deps.hub.publish(BRIDGES_TOPIC, { type: 'bridge.revoked', id: bridgeId });
  }

  /** Drops this process's connections of a revoked bridge and refuses it from now on. */
  private dropRevoked(bridgeId: string): void {
    this.revoked.add(bridgeId);
    for (const client of this.byBridge.get(bridgeId) ?? []) {
      this.deps.log.info({ bridge_id: bridgeId, client_id: client.id }, 'MQTT bridge revoked: disconnecting');
      client.disconnect({ reasonCode: ReasonCode.notAuthorized });
    }
  }

  // ---- authorisation ----------------------------------------------------------------------------

  /** Whether the client's bridge may subscribe to the filter: only under its account's root. */
  private mayFilter(client: Client, filter: string): boolean {
    const conn = this.identities.get(client);
    return conn !== undefined && filter.startsWith(topicRoot(conn.identity.accountId));
  }

  private authorizeSubscribe(client: Client, sub: Subscription): Subscription | null {
    if (this.mayFilter(client, sub.topic)) return sub;
    const conn = this.identities.get(client);
    this.deps.log.warn(
      { bridge_id: conn?.identity.bridgeId, account_id: conn?.identity.accountId, filter: sub.topic },
      'MQTT subscription refused: outside the account topic root',
    );
    return null;
  }

  /**
   * Uplinks are consumed here, never forwarded (not even to other bridges of the account); downlinks
   * go only to the bridges of the device's site, at QoS 1 at most.
   */
  private authorizeForward(client: Client, packet: AedesPublishPacket): AedesPublishPacket | null {
    const conn = this.identities.get(client);
    const topic = parseTopic(packet.topic);
    if (!conn || topic.kind !== 'cmd' || topic.accountId !== conn.identity.accountId) return null;
    const siteId = packet.properties?.userProperties?.site_id;
    if (siteId !== conn.identity.siteId) return null;
    return capQos(packet);
  }

  /**
   * Every publish is decided at once (publishes of one connection are worked on together and share
   * the ingest core's groups); the answers go out in the order the PUBLISHes came. A QoS 1 publish is
   * released to aedes before it is decided, so aedes reads the connection's next packets meanwhile,
   * and its PUBACK is written here after the commit (docs/design/mqtt.md, "A PUBACK means committed").
   */
  private authorizePublish(
    client: Client | null,
    packet: PublishPacket,
    cb: (error?: Error | null) => void,
  ): void {
    stripWillDelay(packet);
    if (this.broker && isWillOfStoppedBroker(packet, this.broker)) {
      this.strandedWill(packet, cb);
      return;
    }
    const conn = client ? this.identities.get(client) : undefined;
    if (!client || !conn) {
      cb(new Error('not an authenticated bridge'));
      return;
    }
    this.messagesReceived++;
    const receivedAt = this.deps.clock.nowMicros();
    if (packet.qos > 0 && !packet.dup && !isWill(packet)) {
      this.receiveTimes.newMessage(client.id, packet.messageId!);
    }
    const decided = this.decide(client, conn.identity, packet, receivedAt).catch((err: unknown): Decision => {
      const context = { bridge_id: conn.identity.bridgeId, topic: packet.topic };
      if (this.deps.dbOutage && isConnectionError(err)) this.deps.dbOutage.refused('publish', err, context);
      else this.deps.log.error({ err, ...context }, 'MQTT publish failed');
      return { kind: 'answer', ...publishAnswerFor(err) };
    });
    if (packet.qos === 0) {
      // No answer, so no place in the order of answers.
      void this.track(decided.then((decision) => this.apply(client, packet, decision, cb)));
      return;
    }
    // The chain below waits for `decided`: tracking the chain covers both (`stop()` waits for it).
    const released = packet.qos === 1 && !isWill(packet) && conn.unanswered < MAX_UNANSWERED_PER_CONNECTION;
    if (released) {
      conn.unanswered++;
      releaseForLaterAnswer(packet, cb);
    }
    const previous = conn.tail;
    conn.tail = this.track(
      (async () => {
        const decision = await decided;
        await previous;
        if (!released) {
          this.apply(client, packet, decision, cb);
          return;
        }
        conn.unanswered--;
        this.answer(client, packet, decision);
      })(),
    );
  }

  /**
   * The will of a connection whose replica stopped (REDIS_URL), published by aedes' sweep on this
   * replica: it becomes its device's state as a will on this replica would, unless its bridge is
   * connected again (to any replica: then the will is stale), is deleted, or cannot be told (a will
   * stored without the bridge's fingerprint). aedes then routes it, made QoS 0 and not retained so
   * that it is neither queued nor kept (`authorizeForward` forwards no uplink), and deletes it. A
   * database that does not answer leaves it stored for the next sweep.
   */
  private strandedWill(packet: PublishPacket, cb: (error?: Error | null) => void): void {
    const work = this.applyStrandedWill(packet).then(() => {
      packet.qos = 0;
      packet.retain = false;
    });
    this.track(work).then(
      () => cb(null),
      (err: unknown) => cb(err instanceof Error ? err : new Error(String(err))),
    );
  }

  private async applyStrandedWill(packet: PublishPacket): Promise<void> {
    const { db, bridges, clock, log } = this.deps;
    const context = { client_id: willClientId(packet), topic: packet.topic };
    const fingerprint = willFingerprint(packet);
    if (!fingerprint) {
      log.warn(context, 'MQTT will of a stopped replica dropped: it names no bridge');
      return;
    }
    try {
      const bridge = await bridges.findByFingerprint(db, fingerprint);
      if (!bridge || bridge.revoked_at !== null || this.revoked.has(bridge.id)) {
        log.info(
          { ...context, bridge_id: bridge?.id },
          'MQTT will of a stopped replica dropped: bridge deleted',
        );
        return;
      }
      if ((await this.connectedAmong([bridge.id])).has(bridge.id)) {
        log.info(
          { ...context, bridge_id: bridge.id },
          'MQTT will of a stopped replica dropped: its bridge is connected again',
        );
        return;
      }
      const identity = { bridgeId: bridge.id, accountId: bridge.account_id, siteId: bridge.site_id };
      const decision = await this.decide(null, identity, packet, clock.nowMicros());
      log.info(
        {
          ...context,
          bridge_id: bridge.id,
          ...(decision.kind === 'ack'
            ? {}
            : { refused: decision.kind === 'refuse' ? decision.reason : decision.reasonString }),
        },
        decision.kind === 'ack'
          ? 'MQTT will of a stopped replica applied'
          : 'MQTT will of a stopped replica refused',
      );
    } catch (err) {
      if (isConnectionError(err)) throw err; // kept for the next sweep, logged by the broker's 'error'
      log.error({ err, ...context }, 'MQTT will of a stopped replica failed; dropped');
    }
  }

  /** Answers a publish through aedes' callback: aedes acknowledges (0x00 or its own 0x87) or not. */
  private apply(
    client: Client,
    packet: PublishPacket,
    decision: Decision,
    cb: (error?: Error | null) => void,
  ): void {
    if (isWill(packet)) {
      cb(new Error('wills are consumed by the service, not routed')); // aedes drops it quietly
      return;
    }
    switch (decision.kind) {
      case 'ack':
        packet.retain = false; // consumed here: not kept as a retained message by the cloud broker
        cb(null);
        return;
      case 'refuse':
        cb(new Error(decision.reason));
        return;
      case 'answer':
        answerPublish(client, packet, decision.reasonCode, decision.reasonString);
        cb(null);
        return;
    }
  }

  /** Answers a publish aedes has left to the bridge, with the PUBACK aedes would have sent. */
  private answer(client: Client, packet: PublishPacket, decision: Decision): void {
    switch (decision.kind) {
      case 'ack':
        answerPublish(client, packet, ReasonCode.success, null);
        return;
      case 'refuse':
        this.broker?.emit('clientError', client, new Error(decision.reason));
        answerPublish(client, packet, ReasonCode.notAuthorized, decision.reason);
        return;
      case 'answer':
        answerPublish(client, packet, decision.reasonCode, decision.reasonString);
        return;
    }
  }

  /** What to answer; throws only for failures of the service itself (answered 0x80). */
  private async decide(
    client: Client | null,
    bridge: BridgeIdentity,
    packet: PublishPacket,
    receivedAt: number,
  ): Promise<Decision> {
    const { log } = this.deps;
    const context = {
      bridge_id: bridge.bridgeId,
      account_id: bridge.accountId,
      topic: packet.topic,
      qos: packet.qos,
    };
    if (isMosquittoBridgeNotification(packet.topic)) {
      log.debug({ ...context, state: packet.payload.toString() }, 'Mosquitto bridge notification (dropped)');
      return { kind: 'answer', reasonCode: ReasonCode.success, reasonString: null };
    }
    const root = topicRoot(bridge.accountId);
    if (!packet.topic.startsWith(root)) {
      log.warn(context, 'MQTT publish refused: outside the account topic root; nothing stored');
      return { kind: 'refuse', reason: `not_authorized: this certificate may publish under ${root} only` };
    }
    if (packet.qos === 0) {
      log.debug(context, 'QoS 0 publish dropped (uplinks need QoS 1)');
      return { kind: 'answer', reasonCode: ReasonCode.success, reasonString: null };
    }
    const topic = parseTopic(packet.topic);
    if (topic.kind === 'invalid') {
      return {
        kind: 'answer',
        reasonCode: ReasonCode.topicNameInvalid,
        reasonString: `invalid_topic: ${topic.reason}`,
      };
    }
    if (topic.kind === 'cmd') {
      return {
        kind: 'answer',
        reasonCode: ReasonCode.notAuthorized,
        reasonString: 'forbidden: cmd/ topics are sent by the service only',
      };
    }
    if (client && packet.qos === 2 && !isWill(packet) && (await isQos2Retransmission(client, packet))) {
      return { kind: 'ack' };
    }
    // Admission control: over capacity, a measurement is refused before its payload is read (PUBACK
    // 0x97; a gateway keeps it and sends it again after a backoff). Last-wills and info are rare
    // state messages, and some have no sender to retry them (a will, a gateway's announcement).
    if (topic.kind === 'measurement' && !isWill(packet) && this.deps.ingest.overloaded()) {
      this.deps.ingest.shed({ way: 'mqtt', measurements: [] });
      return { kind: 'answer', ...publishAnswerFor(Overloaded.instance) };
    }
    try {
      const payload = Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload);
      switch (topic.kind) {
        case 'measurement':
          return await this.measurement(client, packet, bridge, topic.device, payload, receivedAt);
        case 'lwt':
          return await this.lwt(bridge, topic.device, payload, receivedAt);
        case 'info':
          return await this.info(bridge, topic.device, payload);
      }
    } catch (err) {
      if (!(err instanceof ApiError) || err.status >= 500) throw err;
      log.info({ ...context, code: err.code, err: err.message }, 'MQTT publish rejected');
      return { kind: 'answer', ...publishAnswerFor(err) };
    }
  }

  private async measurement(
    client: Client | null,
    packet: PublishPacket,
    bridge: BridgeIdentity,
    segment: string,
    payload: Buffer,
    receivedAt: number,
  ): Promise<Decision> {
    const body = validated(() =>
      validateIngestBody(parseJson(payload), { nowMicros: receivedAt, requireDevice: false }),
    );
    if (body.device !== null && body.device !== segment) {
      throw new Forbidden(
        'forbidden',
        `the topic names device ${segment}; the payload's device ${body.device} differs (leave it out)`,
      );
    }
    // Without `ts` the receive time is the timestamp: a redelivery keeps the first delivery's.
    const ts =
      body.ts ??
      (packet.messageId === undefined || isWill(packet) || !client
        ? null
        : this.receiveTimes.stamp(client.id, packet.messageId, packet.dup, receivedAt));
    return this.submit(bridge, segment, { receivedAt, ts, measurements: body.measurements });
  }

  private async lwt(
    bridge: BridgeIdentity,
    segment: string,
    payload: Buffer,
    receivedAt: number,
  ): Promise<Decision> {
    if (payload.length === 0) return { kind: 'ack' }; // clearing a retained message
    const parsed = LwtPayload.safeParse(parseJson(payload));
    if (!parsed.success) throw payloadError('lwt', parsed.error.issues[0]?.message);
    return this.submit(bridge, segment, { receivedAt, ts: null, measurements: [], lwt: parsed.data.status });
  }

  private async info(bridge: BridgeIdentity, segment: string, payload: Buffer): Promise<Decision> {
    if (payload.length === 0) return { kind: 'ack' };
    const parsed = InfoPayload.safeParse(parseJson(payload));
    if (!parsed.success) throw payloadError('info', parsed.error.issues[0]?.message);
    const device = await this.deps.devices.resolve(bridge, segment, parsed.data.model);
    await this.deps.devices.recordInfo(device, parsed.data);
    return { kind: 'ack' };
  }

  /** Through the one ingest core; resolves after the group committed. */
  private async submit(
    bridge: BridgeIdentity,
    segment: string,
    part: Pick<IngestItem, 'receivedAt' | 'ts' | 'measurements' | 'lwt'>,
  ): Promise<Decision> {
    const { devices, ingest } = this.deps;
    const once = async () =>
      ingest.submit({
        credential: { kind: 'device', principal: await devices.resolve(bridge, segment) },
        // The bridge is authenticated by certificate, and a gateway drains its backlog at full speed;
        // MQTT's in-flight window is the flow control (docs/design/mqtt.md, "Rate limits").
        countRate: false,
        deviceRef: null,
        error: null,
        way: 'mqtt',
        ...part,
      });
    let outcome = await once();
    if (!outcome.ok && outcome.error.code === 'token_invalid') {
      // The cached device was deleted meanwhile: resolve the topic level again (it may create one).
      devices.forget(bridge, segment);
      outcome = await once();
    }
    if (outcome.ok) return { kind: 'ack' };
    if (outcome.error.status >= 500) throw outcome.error;
    return { kind: 'answer', ...publishAnswerFor(outcome.error) };
  }

  // ---- downlinks --------------------------------------------------------------------------------

  async sendCommand(
    device: { accountId: string; siteId: string; localId: string },
    command: CommandName,
    payload: unknown,
  ): Promise<boolean> {
    const broker = this.broker;
    if (!broker || this.stopping) return false;
    // A local_id that is no single topic level ('/', '+', '#') names no device a bridge can be sent to.
    if (!isTopicLevel(device.localId)) return false;
    if (!(await this.reachable(device))) return false;
    await new Promise<void>((resolve, reject) =>
      broker.publish(
        {
          cmd: 'publish',
          topic: commandTopic(device.accountId, device.localId, command),
          payload: Buffer.from(JSON.stringify(payload)),
          qos: 1,
          retain: false,
          dup: false,
          properties: {
            payloadFormatIndicator: true,
            contentType: 'application/json',
            messageExpiryInterval: IDENTIFY_SECONDS,
            userProperties: { site_id: device.siteId },
          },
        },
        (err) => (err ? reject(err) : resolve()),
      ),
    );
    return true;
  }

  /**
   * Whether a bridge of the device's site is connected: to this process, or, when the bridge is
   * clustered (the publish reaches every replica's broker), to any replica.
   */
  private async reachable(device: { accountId: string; siteId: string }): Promise<boolean> {
    for (const [bridgeId, clients] of this.byBridge) {
      if (clients.size === 0 || this.revoked.has(bridgeId)) continue;
      const conn = this.identities.get([...clients][0]!);
      if (conn?.identity.accountId === device.accountId && conn.identity.siteId === device.siteId)
        return true;
    }
    if (!this.cluster) return false;
    const { db, bridges, clock } = this.deps;
    return bridges.siteReachable(
      db,
      device.accountId,
      device.siteId,
      clock.nowMicros() - PRESENCE_STALE_MS * 1000,
    );
  }

  /** The identify command payload (docs/api/mqtt.md, "Identify"). */
  identifyPayload(): { duration_s: number; at: string } {
    return { duration_s: IDENTIFY_SECONDS, at: formatSeconds(this.deps.clock.nowMicros()) };
  }
}

/** A non-empty topic level without the separator, wildcards or NUL (MQTT-3.3.2-2, MQTT-4.7.3-2). */
export function isTopicLevel(level: string): boolean {
  return level.length > 0 && !/[/+#]/.test(level) && !level.includes('\u0000');
}

function parseJson(payload: Buffer): unknown {
  if (payload.length === 0) throw new InvalidRequest('bad_json', 'the payload is empty; send JSON');
  try {
    return JSON.parse(payload.toString('utf8')) as unknown;
  } catch {
    throw new InvalidRequest('bad_json', 'the payload is not valid JSON');
  }
}

function validated<T>(work: () => T): T {
  try {
    return work();
  } catch (err) {
    if (err instanceof IngestValidationError) throw toApiError(err);
    throw err;
  }
}

function payloadError(kind: 'lwt' | 'info', message: string | undefined): InvalidRequest {
  const shape =
    kind === 'lwt'
      ? '{"status": "offline", "reason": "...", "at": "<RFC 3339>"} or {"status": "online", "at": "<RFC 3339>"}'
      : '{"fw_version": "...", "model": "..."}';
  return new InvalidRequest(
    'invalid_request',
    `the ${kind} payload must be ${shape}${message ? ` (${message})` : ''}`,
  );
}
