import { signUp, startTestCloud, type TestCloud } from '../../test/helpers/cloud.ts';
import type { DbKind } from '../../test/helpers/databases.ts';
import { createDevice, createSite } from '../../test/helpers/fixtures.ts';
import {
  closeClient,
  connectBridge,
  createBridge,
  publish,
  type BridgeBundle,
} from '../../test/helpers/mqtt.ts';

/**
 * The world a fuzz run attacks: a real cloud (HTTP and the MQTT bridge) with an account holding a
 * site, a device, a LoRaWAN integration, a bridge and a dashboard session, so generated requests
 * reach real rows as well as missing ones. Rate limits are lifted (a limited request stops before validation); the report
 * family keeps a limit because each accepted report renders a PDF.
 */
export interface FuzzWorld {
  t: TestCloud;
  adminToken: string;
  adminTokenId: string;
  /** The account's dashboard session (the `os_session` cookie's value): the `/app/api` credential. */
  sessionCookie: string;
  deviceToken: string;
  deviceId: string;
  /** The device's `local_id`: what an ingest body names for the device token's own device. */
  deviceLocalId: string;
  /** When the world was made (ms): generated times count back from it, so a seed replays the same bodies. */
  startedAtMs: number;
  integrationToken: string;
  integrationId: string;
  bridge: BridgeBundle;
  topicRoot: string;
  /** Silences on the bridge's sensor, so that the silence routes meet real ones (and may lift them). */
  silenceIds: string[];
  /** Ids the fuzzer must not delete or rotate, or it would lock itself out. */
  protectedIds: Set<string>;
}

export async function startFuzzWorld(db: DbKind): Promise<FuzzWorld> {
  const t = await startTestCloud({
    db,
    mqtt: true,
    env: {
      LOG_LEVEL: 'warn',
      RATE_LIMIT_MGMT_PER_MIN: '1000000000',
      RATE_LIMIT_INGEST_PER_MIN: '1000000000',
      RATE_LIMIT_READ_PER_MIN: '1000000000',
      RATE_LIMIT_REPORT_PER_MIN: '30',
      // Load shedding is the overload scenario's subject, not the fuzzer's: a stall of this process
      // as long as INGEST_MAX_WAIT_MS (2 s) while requests wait for PostgreSQL's writers would have
      // them answered 503 `overloaded`, which the fuzzer counts as a failure.
      INGEST_MAX_WAIT_MS: '600000',
    },
  });
  const user = await signUp(t, 'fuzz@example.com');
  const site = await createSite(t, user.token);
  const device = await createDevice(t, user.token, site.id);
  const integration = await t.http.post(
    '/v1/integrations',
    { kind: 'chirpstack', site_id: site.id, name: 'fuzz' },
    { token: user.token },
  );
  if (integration.status !== 201) throw new Error(`POST /v1/integrations: ${integration.status}`);
  const made = integration.json as { id: string; token: string };
  const bridge = await createBridge(t, user.token, site.id);
  const tokens = await t.http.get('/v1/tokens', { token: user.token });
  const adminTokenId = (tokens.json as { data: { id: string }[] }).data[0]!.id;
  const topicRoot = `service/${user.accountId}`;
  // A reading through the bridge makes a device with sensors and channels for reads to find.
  const client = await connectBridge(t, bridge);
  await publish(client, `${topicRoot}/fridge-1`, { measurements: [{ type: 'temperature', value: 4.5 }] });
  await closeClient(client);
  const devices = await t.http.get('/v1/devices?account_id=me&limit=100', { token: user.token });
  const fridge = (devices.json as { data: { id: string; local_id: string }[] }).data.find(
    (d) => d.local_id === 'fridge-1',
  );
  const sensors = await t.http.get(`/v1/devices/${fridge?.id ?? 'none'}/sensors`, { token: user.token });
  const sensorId = (sensors.json as { data?: { id: string }[] } | null)?.data?.[0]?.id;
  if (!sensorId) throw new Error(`the bridge's sensor: ${sensors.status} ${sensors.text}`);
  const silenceIds: string[] = [];
  for (let i = 1; i <= 3; i++) {
    const from = new Date(Date.now() + i * 3600_000);
    const silence = await t.http.post(
      `/v1/sensors/${sensorId}/silence`,
      {
        from: from.toISOString(),
        to: new Date(from.getTime() + 1800_000).toISOString(),
        reason: `fuzz ${i}`,
      },
      { token: user.token },
    );
    if (silence.status !== 201) throw new Error(`POST silence: ${silence.status} ${silence.text}`);
    silenceIds.push((silence.json as { id: string }).id);
  }
  return {
    t,
    adminToken: user.token,
    adminTokenId,
    sessionCookie: user.cookie,
    deviceToken: device.ingest_token,
    deviceId: device.id,
    deviceLocalId: device.local_id,
    startedAtMs: Date.now(),
    integrationToken: made.token,
    integrationId: made.id,
    bridge,
    topicRoot,
    silenceIds,
    protectedIds: new Set([adminTokenId, device.id, made.id, bridge.id, site.id]),
  };
}
