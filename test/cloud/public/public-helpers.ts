import { formatMicros } from '../../../shared/time.ts';
import type { TestCloud } from '../../helpers/cloud.ts';
import { createDevice, type CreatedDevice } from '../../helpers/fixtures.ts';

/** 2026-01-05T10:00:00Z, a minute (and an hour) boundary. */
export const T0 = Date.UTC(2026, 0, 5, 10, 0, 0) * 1000;
export const MINUTE = 60_000_000;
export const HOUR = 60 * MINUTE;

/** Environment for public API tests: the other limits out of the way. */
export const PUBLIC_ENV = {
  RATE_LIMIT_INGEST_PER_MIN: '100000000',
  RATE_LIMIT_READ_PER_MIN: '100000',
  RATE_LIMIT_MGMT_PER_MIN: '100000',
};

export interface Measurement {
  type: string;
  value: number;
  label?: string;
}

/** Sends one ingest request as a device does; answers the channels it wrote. */
export async function ingest(
  t: TestCloud,
  device: CreatedDevice,
  ts: number,
  measurements: Measurement[],
): Promise<{ channel_id: string }[]> {
  const answer = await t.http.post(
    '/v1/ingest',
    { device: device.local_id, ts: formatMicros(ts), measurements },
    { token: device.ingest_token },
  );
  if (answer.status !== 200) throw new Error(`ingest: ${answer.status} ${answer.text}`);
  return answer.json.channels;
}

export interface Published {
  nickname: string;
  location_name: string;
  lat: number;
  lon: number;
  organisation?: string | null;
}

/** Makes a device public (PATCH /v1/devices/{id} `public`), asserting the happy path. */
export async function publish(
  t: TestCloud,
  token: string,
  deviceId: string,
  settings: Partial<Published> & { enabled?: boolean },
): Promise<Record<string, unknown>> {
  const answer = await t.http.patch(
    `/v1/devices/${deviceId}`,
    { public: { enabled: true, ...settings } },
    { token },
  );
  if (answer.status !== 200) throw new Error(`PATCH public: ${answer.status} ${answer.text}`);
  return answer.json;
}

/** A device with one reading of each kind given, at `ts`. */
export async function deviceWith(
  t: TestCloud,
  token: string,
  siteId: string,
  ts: number,
  measurements: Measurement[],
): Promise<CreatedDevice> {
  const device = await createDevice(t, token, siteId);
  await ingest(t, device, ts, measurements);
  return device;
}

/** The sensor ids of a device by kind (and label), through the owner's API. */
export async function sensorsOf(
  t: TestCloud,
  token: string,
  deviceId: string,
): Promise<{ id: string; channel_id: string; kind: string; label: string | null }[]> {
  const answer = await t.http.get(`/v1/devices/${deviceId}/sensors`, { token });
  if (answer.status !== 200) throw new Error(`GET sensors: ${answer.status} ${answer.text}`);
  return answer.json.data;
}
