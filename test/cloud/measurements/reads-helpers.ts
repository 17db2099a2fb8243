import { formatMicros, parseTimestampMicros } from '../../../shared/time.ts';
import { hashSecret } from '../../../cloud/src/auth/secrets.ts';
import type { ManualClock } from '../../../cloud/src/clock.ts';
import type { IngestItem } from '../../../cloud/src/ingest/ingest.types.ts';
import type { TestCloud } from '../../helpers/cloud.ts';

/** A reading as a device sends it: time in microseconds (or RFC 3339), a temperature value. */
export interface Reading {
  ts: number;
  value: number;
}

export const at = (text: string): number => {
  const micros = parseTimestampMicros(text);
  if (micros === null) throw new Error(`bad timestamp ${text}`);
  return micros;
};

/** Environment for read tests: limits out of the way unless a test is about them. */
export const READ_ENV = {
  RATE_LIMIT_INGEST_PER_MIN: '100000000',
  RATE_LIMIT_READ_PER_MIN: '100000',
  RATE_LIMIT_MGMT_PER_MIN: '100000',
};

/**
 * Sends readings as devices do (POST /v1/ingest, one request per reading, `concurrency` in flight),
 * and answers the channel id of `type`/`label`.
 */
export async function ingestHttp(
  t: TestCloud,
  device: { local_id: string; ingest_token: string },
  readings: Reading[],
  options: { type?: string; label?: string; concurrency?: number } = {},
): Promise<string> {
  const { type = 'temperature', label, concurrency = 16 } = options;
  let channelId = '';
  for (let i = 0; i < readings.length; i += concurrency) {
    const answers = await Promise.all(
      readings.slice(i, i + concurrency).map((r) =>
        t.http.post(
          '/v1/ingest',
          {
            device: device.local_id,
            ts: formatMicros(r.ts),
            measurements: [{ type, value: r.value, ...(label === undefined ? {} : { label }) }],
          },
          { token: device.ingest_token },
        ),
      ),
    );
    for (const a of answers) {
      if (a.status !== 200) throw new Error(`ingest: ${a.status} ${a.text}`);
      channelId = a.json.channels[0].channel_id as string;
    }
  }
  return channelId;
}

/**
 * Hands readings to the cloud's one ingest core all at once, as a burst of concurrent requests
 * would arrive (they are grouped into transactions the same way); the order of `readings` is the
 * order of arrival, so of two readings with one ts the first is stored.
 */
export async function ingestCore(
  t: TestCloud,
  device: { ingest_token: string },
  readings: Reading[],
): Promise<{ accepted: number; deduplicated: number; channelId: string | null }> {
  const tokenHash = hashSecret(device.ingest_token);
  const now = t.cloud.services.clock.nowMicros();
  const outcomes = await Promise.all(
    readings.map((r) => {
      const item: IngestItem = {
        credential: { kind: 'token', tokenHash },
        countRate: false,
        deviceRef: null,
        receivedAt: now,
        ts: r.ts,
        measurements: [{ kind: 'temperature', value: r.value, label: null, unit: '°C' }],
        error: null,
      };
      return t.cloud.services.ingest.submit(item);
    }),
  );
  let accepted = 0;
  let deduplicated = 0;
  let channelId: string | null = null;
  for (const o of outcomes) {
    if (!o.ok) throw o.error;
    accepted += o.accepted;
    deduplicated += o.deduplicated;
    channelId = o.channels[0]?.channel_id ?? channelId;
  }
  return { accepted, deduplicated, channelId };
}

/** Every page of a read, following next_cursor until has_more is false. */
export async function readAll(
  t: TestCloud,
  token: string,
  path: string,
): Promise<{ pages: number; points: { ts: string; value: number }[] }> {
  const points: { ts: string; value: number }[] = [];
  let cursor: string | null = null;
  let pages = 0;
  for (;;) {
    const sep = path.includes('?') ? '&' : '?';
    const url: string = cursor === null ? path : `${path}${sep}cursor=${encodeURIComponent(cursor)}`;
    const answer = await t.http.get(url, { token });
    if (answer.status !== 200) throw new Error(`GET ${url}: ${answer.status} ${answer.text}`);
    pages++;
    points.push(...(answer.json.data as { ts: string; value: number }[]));
    if (!answer.json.has_more) {
      if (answer.json.next_cursor !== null) throw new Error('has_more false but next_cursor set');
      return { pages, points };
    }
    cursor = answer.json.next_cursor as string;
    if (!cursor) throw new Error('has_more true but no next_cursor');
  }
}

/**
 * Ingests readings as they are taken: in time order, ten days at a time with the clock at the last
 * of each ten days (the core refuses a time older than the retention keeps), then sets the clock to
 * `now`. For tests whose readings span more than the retention.
 */
export async function ingestAsTaken(
  t: TestCloud,
  clock: ManualClock,
  device: { ingest_token: string },
  readings: Reading[],
  now: number,
): Promise<string | null> {
  const sorted = [...readings].sort((a, b) => a.ts - b.ts);
  let channelId: string | null = null;
  for (let i = 0; i < sorted.length;) {
    const end = sorted[i]!.ts + 10 * 24 * 3_600_000_000;
    const chunk: Reading[] = [];
    while (i < sorted.length && sorted[i]!.ts < end) chunk.push(sorted[i++]!);
    clock.set(chunk.at(-1)!.ts);
    channelId = (await ingestCore(t, device, chunk)).channelId ?? channelId;
  }
  clock.set(now);
  return channelId;
}
