import { newId } from '../../shared/ids.ts';
import type { AlarmEventRow } from '../../cloud/src/events/events.repository.ts';
import type { SensorRow } from '../../cloud/src/sensors/sensors.repository.ts';
import type { TestCloud } from './cloud.ts';

/**
 * Resources made the way a user makes them (through the API), asserting the happy path so a suite
 * that builds on them fails at the step that broke.
 */
export async function createSite(
  t: TestCloud,
  token: string,
  body: Record<string, unknown> = {},
): Promise<{ id: string; name: string; vertical: string; timezone: string }> {
  const answer = await t.http.post(
    '/v1/sites',
    { name: 'Kitchen', vertical: 'food_service', ...body },
    { token },
  );
  if (answer.status !== 201) throw new Error(`POST /v1/sites: ${answer.status} ${answer.text}`);
  return answer.json;
}

export interface CreatedDevice {
  id: string;
  local_id: string;
  ingest_token: string;
  ingest_url: string;
  issued_at: string;
}

export async function createDevice(
  t: TestCloud,
  token: string,
  siteId: string,
  body: Record<string, unknown> = {},
): Promise<CreatedDevice> {
  const answer = await t.http.post(
    '/v1/devices',
    {
      site_id: siteId,
      local_id: `dev-${newId('dev').slice(4, 12)}`,
      name: 'Fridge',
      model: 'http-generic',
      ...body,
    },
    { token },
  );
  if (answer.status !== 201) throw new Error(`POST /v1/devices: ${answer.status} ${answer.text}`);
  return answer.json;
}

/**
 * A sensor as ingest would create it on a device's first uplink (ingest is the only way in through
 * the API), written with the repository.
 */
/** The URL a Shelly H&T Gen1 requests: the device's `ingest_url` with its template values filled in. */
export function shellyActionUrl(device: CreatedDevice, temperature: number, humidity = 61): URL {
  return new URL(
    device.ingest_url
      .replace('$temperature', String(temperature))
      .replace('$humidity', String(humidity))
      .replace('$bat', '87')
      .replace('$rssi', '-67'),
  );
}

export async function insertSensor(
  t: TestCloud,
  device: { accountId: string; deviceId: string },
  fields: Partial<SensorRow> = {},
): Promise<SensorRow> {
  const { db, clock, sensorsRepository } = t.cloud.services;
  const label = fields.label ?? null;
  return sensorsRepository.insert(db, {
    id: newId('snr'),
    channel_id: newId('chn'),
    account_id: device.accountId,
    device_id: device.deviceId,
    kind: 'temperature',
    label,
    label_key: label ?? '',
    unit: '°C',
    ok_min: 0,
    ok_max: 5,
    grace_min: 30,
    rule_enabled: 1,
    no_data_min: 60,
    last_value: null,
    last_ts: null,
    state: 'no_data',
    created_at: clock.nowMicros(),
    ...fields,
  });
}

/** The account's audit entries of one kind, newest first. */
export async function auditOf(t: TestCloud, token: string, kind: string): Promise<Record<string, unknown>[]> {
  const answer = await t.http.get(`/v1/accounts/me/audit?kind=${encodeURIComponent(kind)}`, { token });
  if (answer.status !== 200) throw new Error(`GET audit: ${answer.status} ${answer.text}`);
  return answer.json.data;
}

/** How many measurement rows the cloud's database holds (every channel, every device). */
export async function measurementCount(t: TestCloud): Promise<number> {
  const row = await t.cloud.services.db
    .selectFrom('measurements')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** An alarm event row as the rule engine writes it: threshold_high on 0..5, peak 9, 30 minutes' grace. */
export function alarmEventRow(
  owner: {
    accountId: string;
    siteId: string;
    deviceId: string;
    sensor: { id: string; seq: number };
    channelId: string;
  },
  id: string,
  startedAt: number,
  more: Partial<AlarmEventRow> = {},
): AlarmEventRow {
  return {
    id,
    account_id: owner.accountId,
    site_id: owner.siteId,
    device_id: owner.deviceId,
    sensor_id: owner.sensor.id,
    channel_id: owner.channelId,
    sensor_seq: owner.sensor.seq,
    kind: 'threshold_high' as const,
    started_at: startedAt,
    alarm_at: startedAt + 30 * 60_000_000,
    ended_at: null,
    ok_min: 0,
    ok_max: 5,
    peak_value: 9,
    silenced: 0,
    acknowledged_at: null,
    acknowledged_by: null,
    ack_note: null,
    withdrawn_at: null,
    notified_open_at: null,
    notified_resolved_at: null,
    created_at: startedAt,
    updated_at: startedAt,
    ...more,
  };
}

/**
 * Registers a webhook for `events` (the cloud must allow private addresses: WEBHOOK_ALLOW_PRIVATE);
 * by default at a loopback port nothing listens on, for tests of what is queued, not delivered.
 */
export async function createWebhook(
  t: TestCloud,
  token: string,
  events: string[],
  url = 'http://127.0.0.1:9/hook',
): Promise<{ id: string; secret: string }> {
  const answer = await t.http.post('/v1/webhooks', { url, events }, { token });
  if (answer.status !== 201) throw new Error(`POST /v1/webhooks: ${answer.status} ${answer.text}`);
  return answer.json;
}
