import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { Aedes } from 'aedes';
import type { MqttClient } from 'mqtt';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createDevice, createSite, measurementCount } from '../../helpers/fixtures.ts';
import { closeClient, connectBridge, createBridge, publish, type BridgeBundle } from '../../helpers/mqtt.ts';

/**
 * What aedes reports as a broker 'error' (its persistence failing) and the wills it publishes for a
 * replica that stopped (REDIS_URL): neither may end the process, and such a will is consumed.
 */
describe.each(DATABASES)('MQTT broker errors and wills of stopped replicas on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  let siteId: string;
  let bundle: BridgeBundle;
  const clients: MqttClient[] = [];

  const root = () => `service/${user.accountId}`;
  const broker = () => (t.cloud.services.mqtt as unknown as { broker: Broker }).broker;
  const scoped = (clientId: string) => `${bundle.cert_fingerprint.slice(0, 16)}/${clientId}`;
  const connect = async (options = {}) => {
    const c = await connectBridge(t, bundle, options);
    clients.push(c);
    return c;
  };
  const gateway = async () =>
    ((await t.http.get(`/v1/devices?site_id=${siteId}`, { token: user.token })).json.data as Device[]).find(
      (d) => d.local_id === 'gw',
    );
  const bridgeConnected = async () =>
    (await t.http.get(`/v1/bridges/${bundle.id}`, { token: user.token })).json.connected as boolean;

  beforeEach(async () => {
    t = await startTestCloud({ db, mqtt: true });
    user = await signUp(t, 'ops@example.com');
    siteId = (await createSite(t, user.token, { vertical: 'food_service' })).id;
    bundle = await createBridge(t, user.token, siteId);
    await createDevice(t, user.token, siteId, { local_id: 'gw', model: 'gateway-pi' });
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) await closeClient(c);
    await t?.stop();
  });

  it('logs a persistence failure aedes reports as an error, and goes on', async () => {
    const c = await connect({ clientId: 'gw-1', properties: { sessionExpiryInterval: 0 } });
    const persistence = broker().persistence;
    const cleanSubscriptions = persistence.cleanSubscriptions.bind(persistence);
    // What aedes-persistence-redis answers when Redis is unreachable; aedes wipes a session that ends
    // with its connection and reports the failure as 'error'.
    persistence.cleanSubscriptions = () => {
      persistence.cleanSubscriptions = cleanSubscriptions;
      return Promise.reject(new Error('Reached the max retries per request limit'));
    };
    c.stream.destroy();
    await eventually(
      () =>
        t.logs.some(
          (l) =>
            l.msg === 'MQTT broker: session storage failed; the broker goes on' &&
            (l.err as { message?: string }).message === 'Reached the max retries per request limit',
        ),
      'the failure in the log',
    );
    const again = await connect({ clientId: 'gw-2' });
    expect(
      (
        await publish(again, `${root()}/fridge-1`, {
          ts: '2026-01-05T10:00:00Z',
          measurements: [{ type: 'temperature', value: 4 }],
        })
      ).reasonCode,
    ).toBe(0);
    expect(await measurementCount(t)).toBe(1);
  });

  /**
   * A gateway's will as aedes keeps it for a replica that stopped: the will its CONNECT set, stored
   * under the id of a broker that no longer sends heartbeats. Made from a real connection's stored
   * will, which a clean DISCONNECT then leaves unpublished.
   */
  async function strandedWill(clientId: string): Promise<StoredWill> {
    const c = await connect({
      clientId,
      will: {
        topic: `${root()}/gw/lwt`,
        payload: Buffer.from(JSON.stringify({ status: 'offline', reason: 'gateway lost' })),
        qos: 1,
        retain: true,
      },
    });
    expect((await publish(c, `${root()}/gw/lwt`, { status: 'online' })).reasonCode).toBe(0);
    const persistence = broker().persistence;
    const will = { ...(await persistence.getWill({ id: scoped(clientId) }))! };
    await c.endAsync();
    await eventually(async () => !(await bridgeConnected()), 'the bridge to be disconnected');
    await persistence.putWill({ id: scoped(clientId) }, will);
    will.brokerId = 'stopped-replica'; // the memory persistence keeps the object itself
    return will;
  }

  /** aedes' sweep of stopped brokers' wills, which its timer runs every 4 heartbeats (240 s). */
  function sweepWills(): void {
    broker()._clearWillInterval._onTimeout();
  }

  const willGone = async (clientId: string) =>
    (await broker().persistence.getWill({ id: scoped(clientId) })) === undefined;

  it('applies the will of a gateway whose replica stopped, and aedes deletes it', async () => {
    await strandedWill('gw-1');
    expect((await gateway())?.online).toBe(true);
    sweepWills();
    await eventually(async () => (await gateway())?.online === false, 'the will to mark the gateway offline');
    await eventually(() => willGone('gw-1'), 'the will to be deleted');
    expect(t.logs.some((l) => l.msg === 'MQTT will of a stopped replica applied')).toBe(true);
  });

  it('drops such a will when its bridge is connected again, or when it names no bridge', async () => {
    const stale = await strandedWill('gw-1');
    expect(stale.brokerId).toBe('stopped-replica');
    const anonymous = await strandedWill('gw-2');
    delete anonymous.bridgeFingerprint; // as stored by a server that did not record it
    await connect({ clientId: 'gw-3' }); // the gateway is back (through another replica, or this one)
    await eventually(bridgeConnected, 'the bridge to be connected');
    sweepWills();
    await eventually(async () => (await willGone('gw-1')) && (await willGone('gw-2')), 'both wills deleted');
    expect((await gateway())?.online).toBe(true);
    expect(t.logs.map((l) => l.msg)).toEqual(
      expect.arrayContaining([
        'MQTT will of a stopped replica dropped: its bridge is connected again',
        'MQTT will of a stopped replica dropped: it names no bridge',
      ]),
    );
  });
});

interface Device {
  local_id: string;
  online: boolean;
}

interface StoredWill {
  topic: string;
  payload: Buffer;
  brokerId?: string;
  bridgeFingerprint?: string;
}

/** The parts of aedes (memory persistence, the will sweep's timer) these tests reach. */
type Broker = Aedes & {
  persistence: {
    cleanSubscriptions(client: unknown): Promise<void>;
    getWill(client: { id: string }): Promise<StoredWill | undefined>;
    putWill(client: { id: string }, will: StoredWill): Promise<void>;
  };
  _clearWillInterval: { _onTimeout(): void };
};
