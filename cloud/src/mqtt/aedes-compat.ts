import type { TLSSocket } from 'node:tls';
import type { AedesPublishPacket, Client, ConnectPacket, PublishPacket } from 'aedes';
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
 * §3(c): a retransmitted QoS 2 PUBLISH (same packet id, before PUBREL) is already in aedes' incoming
 * store; it must be acknowledged again but not processed again (exactly once).
 */
export async function isQos2Retransmission(client: Client, packet: PublishPacket): Promise<boolean> {
  if (packet.qos !== 2) return false;
  const persistence = (client as unknown as { broker: { persistence: IncomingStore } }).broker.persistence;
  try {
    await persistence.incomingGetPacket(client, packet);
    return true;
  } catch {
    return false; // not found: a new message
  }
}

interface IncomingStore {
  incomingGetPacket(client: Client, packet: PublishPacket): Promise<unknown>;
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
