import type { TLSSocket } from 'node:tls';
import type { Aedes, AedesPublishPacket, Client, ConnectPacket, PublishPacket, Subscription } from 'aedes';
import mqttPacket from 'mqtt-packet';

/**
 * Every place the bridge relies on aedes 2.0.0-beta.1 behaviour that is not its documented API, or
 * works around one of its gaps (shared/reference/aedes-mqtt5.md). A later aedes release replaces
 * them here, in one file; `test/cloud/mqtt/aedes-compat.test.ts` pins each one down.
 */

/** What the client certificate says, read while the TLS socket is still open. */
export interface PeerCertificate {
  commonName: string;
  /** SHA-256 of the DER certificate, lower-case hex. */
  fingerprint: string;
  /** Lower-case hex. */
  serial: string;
}

const peers = new WeakMap<Client, PeerCertificate>();

/**
 * §1: reads the client certificate in `preConnect` and keeps it with the client. Once the socket is
 * destroyed `getPeerCertificate()` returns nothing, yet aedes still authorises the client's will
 * (after DISCONNECT 0x04, or a delayed will) with that client object.
 */
export function rememberPeer(client: Client): PeerCertificate | null {
  const socket = client.conn as Partial<TLSSocket>;
  const cert = typeof socket.getPeerCertificate === 'function' ? socket.getPeerCertificate() : null;
  if (!cert || !cert.fingerprint256 || socket.authorized !== true) return null;
  const cn = cert.subject?.CN;
  const peer = {
    commonName: Array.isArray(cn) ? String(cn[0]) : String(cn ?? ''),
    fingerprint: cert.fingerprint256.replace(/:/g, '').toLowerCase(),
    serial: cert.serialNumber.toLowerCase(),
  };
  peers.set(client, peer);
  return peer;
}

export function peerOf(client: Client | null): PeerCertificate | null {
  return client ? (peers.get(client) ?? null) : null;
}

/**
 * Client ids are one namespace in aedes: a second connection with the same id takes the first over,
 * session and queued messages included. Prefixing the id with the certificate's fingerprint in
 * `preConnect` (before aedes reads it) keeps one bridge from taking over another's session.
 */
export function scopeClientId(packet: ConnectPacket, peer: PeerCertificate): void {
  packet.clientId = `${peer.fingerprint.slice(0, 16)}/${packet.clientId}`;
}

/**
 * §2: a CONNECT that is not MQTT 5 gets CONNACK return code 1 "unacceptable protocol version" from
 * aedes' own version check when its version is made invalid here. Refusing in the hook instead
 * would close the socket without any CONNACK.
 */
export function refuseUnlessMqtt5(packet: ConnectPacket): boolean {
  if (packet.protocolVersion === 5) return false;
  (packet as { protocolVersion: number }).protocolVersion = 0;
  return true;
}

/**
 * §7: Mosquitto bridges connect with Clean Start 0 and no Session Expiry Interval (= 0: the session
 * ends with the connection), so downlinks sent while the bridge is away would be lost. A client
 * that asks to resume a session without saying for how long gets `seconds`.
 */
export function keepResumableSession(packet: ConnectPacket, seconds: number): boolean {
  if (packet.clean !== false || packet.properties?.sessionExpiryInterval !== undefined) return false;
  packet.properties = { ...packet.properties, sessionExpiryInterval: seconds };
  return true;
}

/**
 * §5: aedes forwards a will's Will Delay Interval as a PUBLISH property, which MQTT 5 does not allow
 * there; Mosquitto then drops the bridge as malformed. Removed before anything is routed or retained.
 */
export function stripWillDelay(packet: PublishPacket): void {
  if (packet.properties && 'willDelayInterval' in packet.properties) {
    delete (packet.properties as Record<string, unknown>).willDelayInterval;
  }
}

/** A will (built from the CONNECT, published by aedes) rather than a PUBLISH the client sent. */
export function isWill(packet: PublishPacket): boolean {
  return (packet as { cmd?: string }).cmd !== 'publish';
}

/**
 * §7: Mosquitto publishes its bridge state on `$SYS/broker/connection/<name>/state` (and sets its
 * will there). Refused, it would cost an error per reconnect; it is acknowledged and dropped.
 */
export function isMosquittoBridgeNotification(topic: string): boolean {
  return /^\$SYS\/broker\/connection\/[^/]+\/state$/.test(topic);
}

/**
 * §3(c): aedes re-runs `authorizePublish` for a QoS 2 PUBLISH it already stored (its incoming store,
 * kept until PUBREL), and answers it PUBREC 0x00 without routing it again. The bridge must then not
 * process it again (exactly once), but only for a true retransmission: aedes keeps an entry left by
 * a connection that dropped between PUBREC and PUBREL after the session ended, and a client that
 * starts over (a Mosquitto bridge restarted without persistence) reuses the packet id for a new
 * message. So a retransmission is a PUBLISH with DUP set whose stored packet has the same topic and
 * payload. A stored packet that is not this one is removed, so that aedes stores this message in its
 * place and a later retransmission of it is recognised.
 */
export async function isQos2Retransmission(client: Client, packet: PublishPacket): Promise<boolean> {
  if (packet.qos !== 2 || packet.messageId === undefined) return false;
  const persistence = persistenceOf(client);
  let stored: StoredPacket;
  try {
    stored = (await persistence.incomingGetPacket(client, packet)) as StoredPacket;
  } catch {
    return false; // not found: a new message
  }
  if (packet.dup && stored.topic === packet.topic && samePayload(stored.payload, packet.payload)) return true;
  await persistence.incomingDelPacket(client, packet).catch(() => undefined);
  return false;
}

interface StoredPacket {
  topic?: unknown;
  payload?: unknown;
}

function samePayload(stored: unknown, payload: PublishPacket['payload']): boolean {
  if (typeof stored !== 'string' && !(stored instanceof Uint8Array)) return false;
  return Buffer.from(stored).equals(Buffer.from(payload));
}

/** The part of aedes' persistence (memory or Redis, both async in aedes 2) the workarounds use. */
interface Persistence {
  incomingStorePacket(client: Pick<Client, 'id'>, packet: PublishPacket): Promise<unknown>;
  incomingGetPacket(client: Pick<Client, 'id'>, packet: PublishPacket): Promise<unknown>;
  incomingDelPacket(client: Pick<Client, 'id'>, packet: Pick<PublishPacket, 'messageId'>): Promise<unknown>;
  addSubscriptions(client: Client, subs: Subscription[]): Promise<unknown>;
  subscriptionsByClient(client: Pick<Client, 'id'>): Promise<Subscription[]>;
  removeSubscriptions(client: Pick<Client, 'id'>, topics: string[]): Promise<unknown>;
}

function persistenceOf(client: Client): Persistence {
  return (client as unknown as { broker: { persistence: Persistence } }).broker.persistence;
}

/** aedes' persistence, as `Aedes.createBroker` set it up. */
export function brokerPersistence(broker: Aedes): Persistence {
  return (broker as unknown as { persistence: Persistence }).persistence;
}

/**
 * aedes removes a QoS 2 packet from its incoming store only at PUBREL, never when the session ends:
 * an entry whose PUBREL never came (the connection dropped after PUBREC, and the session ended or
 * started over) stays for the life of the process, with its whole payload. This keeps, per client
 * id, the packet ids this process stored and has not seen released, so that `clear` removes them at
 * Clean Start and when the session ends. Kept in the process: with REDIS_URL a session that moves to
 * another replica leaves its entries in Redis, where `isQos2Retransmission` still tells them from new
 * messages.
 */
export class IncomingQos2 {
  private readonly byClient = new Map<string, Set<number>>();
  private readonly del: Persistence['incomingDelPacket'];

  constructor(persistence: Persistence) {
    const store = persistence.incomingStorePacket.bind(persistence);
    const del = persistence.incomingDelPacket.bind(persistence);
    this.del = del;
    persistence.incomingStorePacket = async (client, packet) => {
      const result = await store(client, packet);
      if (packet.messageId !== undefined) {
        let ids = this.byClient.get(client.id);
        if (!ids) this.byClient.set(client.id, (ids = new Set()));
        ids.add(packet.messageId);
      }
      return result;
    };
    persistence.incomingDelPacket = (client, packet) => {
      const ids = this.byClient.get(client.id);
      if (ids && packet.messageId !== undefined) {
        ids.delete(packet.messageId);
        if (ids.size === 0) this.byClient.delete(client.id);
      }
      return del(client, packet);
    };
  }

  /**
   * Removes every entry this process stored for the client id and has not seen released. Best effort:
   * an entry a failed removal leaves is told from a new message by `isQos2Retransmission`.
   */
  async clear(clientId: string): Promise<void> {
    const ids = this.byClient.get(clientId);
    if (!ids) return;
    this.byClient.delete(clientId);
    await Promise.allSettled([...ids].map((messageId) => this.del({ id: clientId }, { messageId })));
  }

  /** Entries held for the client id (for tests). */
  held(clientId: string): number {
    return this.byClient.get(clientId)?.size ?? 0;
  }
}

/**
 * §4: aedes' SUBSCRIBE handler stores the whole packet's filters in a persistent session for each
 * filter `authorizeSubscribe` allowed, refused ones included: a refused `#` would then stay in the
 * session, and every QoS 1 message routed for any account would be queued into it while the client
 * is away (never delivered: `authorizeForward` filters the replay, but the queue grows without
 * bound). Only the filters `allowed` accepts are stored.
 */
export function storeOnlyAllowedSubscriptions(
  persistence: Persistence,
  allowed: (client: Client, sub: Subscription) => boolean,
): void {
  const add = persistence.addSubscriptions.bind(persistence);
  persistence.addSubscriptions = async (client, subs) => {
    const kept = subs.filter((sub) => allowed(client, sub));
    if (kept.length > 0) await add(client, kept);
  };
}

/**
 * Removes from a resumed session the stored filters `allowed` refuses (stored before
 * `storeOnlyAllowedSubscriptions`, or allowed no longer); aedes restores them without subscribing,
 * yet still queues messages for them.
 */
export async function pruneStoredSubscriptions(
  persistence: Persistence,
  client: Client,
  allowed: (client: Client, sub: Subscription) => boolean,
): Promise<number> {
  const refused = (await persistence.subscriptionsByClient(client)).filter((sub) => !allowed(client, sub));
  if (refused.length > 0)
    await persistence.removeSubscriptions(
      client,
      refused.map((sub) => sub.topic),
    );
  return refused.length;
}

/**
 * aedes publishes the stored wills of a broker that stopped heart-beating (a replica that died,
 * REDIS_URL) from any other broker, every 4 heartbeats, through `authorizePublish` with the client
 * of that id on this broker, usually none. Such a will carries the id of the broker that stored it;
 * a will of this broker's own clients carries this broker's id.
 */
export function isWillOfStoppedBroker(packet: PublishPacket, broker: Pick<Aedes, 'id'>): boolean {
  const brokerId = (packet as { brokerId?: unknown }).brokerId;
  return isWill(packet) && typeof brokerId === 'string' && brokerId !== broker.id;
}

/** The client id aedes stored a will under. */
export function willClientId(packet: PublishPacket): string | null {
  const clientId = (packet as { clientId?: unknown }).clientId;
  return typeof clientId === 'string' ? clientId : null;
}

/**
 * The certificate fingerprint of the bridge whose CONNECT set the will, kept on the will itself (aedes
 * stores the CONNECT's will object as it is, in memory or in Redis), so that any replica can tell
 * whose will it is once the connection and its replica are gone. aedes copies only the PUBLISH fields
 * when it routes a will, so the field goes no further.
 */
export function tagWill(packet: ConnectPacket, peer: PeerCertificate): void {
  if (packet.will) (packet.will as { bridgeFingerprint?: string }).bridgeFingerprint = peer.fingerprint;
}

export function willFingerprint(packet: PublishPacket): string | null {
  const fingerprint = (packet as { bridgeFingerprint?: unknown }).bridgeFingerprint;
  return typeof fingerprint === 'string' && /^[0-9a-f]{64}$/.test(fingerprint) ? fingerprint : null;
}

/**
 * aedes reads a connection's next bytes only once the packets of the previous read are handled (its
 * private `_parsingBatch` count), and a PUBLISH is handled when `authorizePublish` calls back.
 * Holding the callback until the commit therefore keeps a connection's pipelined publishes to about
 * one socket read per commit (docs/design/mqtt.md, "Alternatives rejected").
 * Marking the packet with aedes' private `_notAuthorized` flag before calling back lets aedes read on
 * without acknowledging or routing it; the caller answers it later with `answerPublish`. QoS 1 only:
 * a QoS 2 PUBLISH needs aedes' own flow (incoming store, PUBREC, PUBREL).
 */
export function releaseForLaterAnswer(packet: PublishPacket, callback: (error?: Error | null) => void): void {
  (packet as { _notAuthorized?: boolean })._notAuthorized = true;
  callback(null);
}

/**
 * §3(d): answers a PUBLISH with any reason code (aedes' API only knows 0x87) and keeps aedes from
 * acknowledging or routing it again, through its private `_notAuthorized` flag. QoS 0 is dropped
 * without an answer; QoS 2 is answered with PUBREC (a failure code ends the exchange).
 */
export function answerPublish(
  client: Client,
  packet: PublishPacket,
  reasonCode: number,
  reasonString: string | null,
): void {
  (packet as { _notAuthorized?: boolean })._notAuthorized = true;
  if (packet.qos === 0 || isWill(packet) || client.closed) return;
  const problemInfo =
    (client as { _requestProblemInformation?: boolean })._requestProblemInformation !== false;
  mqttPacket.writeToStream(
    {
      cmd: packet.qos === 2 ? 'pubrec' : 'puback',
      messageId: packet.messageId!,
      reasonCode,
      ...(reasonString && problemInfo ? { properties: { reasonString: reasonString.slice(0, 1024) } } : {}),
    },
    client.conn,
    { protocolVersion: 5 },
  );
}

/**
 * §4 and §3(c): aedes does not cap delivered QoS at the granted QoS for wildcard filters, and QoS 2
 * is handled as 1 here; every delivery goes out at QoS 1 at most.
 */
export function capQos<P extends AedesPublishPacket>(packet: P): P {
  return packet.qos > 1 ? { ...packet, qos: 1 } : packet;
}

/**
 * §8: aedes keeps a client's subscriptions in a plain object and looks an UNSUBSCRIBE's filter up in
 * it, so a filter named like an Object.prototype member (`constructor`, `toString`) finds an inherited
 * function, and aedes hands mqemitter an undefined listener, whose assertion throws out of the socket's
 * data handler: one packet from a bridge would stop the process. With no prototype, such a filter
 * finds nothing and gets reason code 0x11 "no subscription existed". Called in `preConnect`, before any
 * other packet of the client is read.
 */
export function guardSubscriptionNames(client: Client): void {
  const holder = client as unknown as { subscriptions: Record<string, unknown> };
  holder.subscriptions = Object.assign(Object.create(null) as Record<string, unknown>, holder.subscriptions);
}
