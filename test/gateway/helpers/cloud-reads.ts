import fs from 'node:fs';
import type { TestCloud } from '../../helpers/cloud.ts';
import type { BridgeBundle } from '../../helpers/mqtt.ts';
import { mqttUrl } from '../../helpers/mqtt.ts';

/** Reads through the public API, as a user of the cloud sees the gateway's data. */

export async function deviceByLocalId(
  t: TestCloud,
  token: string,
  siteId: string,
  localId: string,
): Promise<Record<string, any> | null> {
  const answer = await t.http.get(`/v1/devices?site_id=${siteId}&limit=500`, { token });
  if (answer.status !== 200) throw new Error(`GET /v1/devices: ${answer.status} ${answer.text}`);
  return (answer.json.data as Record<string, any>[]).find((d) => d.local_id === localId) ?? null;
}

export async function sensorsOf(
  t: TestCloud,
  token: string,
  deviceId: string,
): Promise<Record<string, any>[]> {
  const answer = await t.http.get(`/v1/devices/${deviceId}/sensors`, { token });
  if (answer.status !== 200) throw new Error(`GET sensors: ${answer.status} ${answer.text}`);
  return answer.json.data;
}

/** Every raw point of a channel since `from` (default 24 h ago), oldest first, all pages. */
export async function pointsOf(
  t: TestCloud,
  token: string,
  channelId: string,
  from = new Date(Date.now() - 23 * 3600_000).toISOString(),
): Promise<{ ts: string; value: number }[]> {
  const points: { ts: string; value: number }[] = [];
  let cursor: string | null = null;
  do {
    const query: string = `from=${encodeURIComponent(from)}&limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const answer = await t.http.get(`/v1/channels/${channelId}/measurements?${query}`, { token });
    if (answer.status !== 200) throw new Error(`GET measurements: ${answer.status} ${answer.text}`);
    points.push(...(answer.json.data as { ts: string; value: number }[]));
    cursor = answer.json.next_cursor;
  } while (cursor);
  return points;
}

/** The points of one (kind, label) channel of a device named by local id; [] while it does not exist. */
export async function channelPoints(
  t: TestCloud,
  token: string,
  siteId: string,
  localId: string,
  kind: string,
  label: string | null = null,
): Promise<{ ts: string; value: number }[]> {
  const device = await deviceByLocalId(t, token, siteId, localId);
  if (!device) return [];
  const sensor = (await sensorsOf(t, token, device.id as string)).find(
    (s) => s.kind === kind && (s.label ?? null) === label,
  );
  if (!sensor) return [];
  return pointsOf(t, token, sensor.channel_id as string);
}

/** Saves a bridge bundle as an installer would, pointing it at the test cloud's MQTT port. */
export function saveBundle(file: string, t: TestCloud, bundle: BridgeBundle): void {
  fs.writeFileSync(file, JSON.stringify({ ...bundle, mqtt_url: mqttUrl(t) }));
}
