/**
 * The receive time of each measurement that came without `ts`, by session (client id) and packet id.
 * A QoS 1 PUBLISH whose PUBACK was lost with its connection comes again with DUP set and the same
 * packet id on the resumed session; stamped with the first delivery's time instead of a new one, it
 * meets the (device, ts, channel) dedup and is stored once.
 *
 * An entry lives until the client reuses its packet id for a new message (a PUBLISH without DUP) or
 * the session ends: Clean Start, a session that ends with its connection (Session Expiry 0), or
 * aedes' session expiry. It is kept in this process, as aedes keeps the session itself.
 */
export class ReceiveTimes {
  private readonly sessions = new Map<string, Map<number, number>>();

  /** A PUBLISH without DUP: its packet id names a new message from now on. */
  newMessage(clientId: string, packetId: number): void {
    this.sessions.get(clientId)?.delete(packetId);
  }

  /** The time to stamp a measurement without `ts` with: the first delivery's for a redelivery, else `now`. */
  stamp(clientId: string, packetId: number, dup: boolean, now: number): number {
    let session = this.sessions.get(clientId);
    const first = dup ? session?.get(packetId) : undefined;
    if (first !== undefined) return first;
    if (!session) this.sessions.set(clientId, (session = new Map<number, number>()));
    session.set(packetId, now);
    return now;
  }

  endSession(clientId: string): void {
    this.sessions.delete(clientId);
  }
}
