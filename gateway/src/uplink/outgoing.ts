import { MAX_MEASUREMENTS } from '../../../shared/ingest.ts';
import { formatMicros } from '../../../shared/time.ts';
import type { QueuedMessage } from '../buffer/reading-queue.ts';

/** One MQTT message built from one or more queued rows; all of them leave the queue on its PUBACK. */
export interface OutgoingMessage {
  ids: number[];
  topic: string;
  payload: string;
  retain: boolean;
}

interface WireMeasurement {
  type: string;
  label?: string;
}

/**
 * Turns queued rows (oldest first) into bridge messages (interface spec, "MQTT bridge"):
 * readings of one device with the same `ts` share one measurement payload of up to 32
 * measurements, to cut messages; a (type, label) seen twice starts a new payload so no message
 * carries the same content key twice. States go to `.../lwt` and info to `.../info`, both retained.
 * Messages keep the order of their first row.
 */
export function buildMessages(rows: readonly QueuedMessage[], topicRoot: string): OutgoingMessage[] {
  const out: OutgoingMessage[] = [];
  interface Group {
    message: OutgoingMessage;
    ts: number;
    measurements: unknown[];
    keys: Set<string>;
  }
  const open = new Map<string, Group>();
  const groups: Group[] = [];
  for (const row of rows) {
    if (row.kind !== 'reading') {
      const suffix = row.kind === 'state' ? 'lwt' : 'info';
      out.push({
        ids: [row.id],
        topic: `${topicRoot}${row.device}/${suffix}`,
        payload: row.body,
        retain: true,
      });
      continue;
    }
    const measurements = JSON.parse(row.body) as WireMeasurement[];
    const groupKey = `${row.device}\u0000${row.ts}`;
    const group = open.get(groupKey);
    const keys = measurements.map((m) => `${m.type}\u0000${m.label ?? ''}`);
    if (
      group &&
      group.measurements.length + measurements.length <= MAX_MEASUREMENTS &&
      !keys.some((k) => group.keys.has(k))
    ) {
      group.message.ids.push(row.id);
      group.measurements.push(...measurements);
      for (const k of keys) group.keys.add(k);
      continue;
    }
    const message: OutgoingMessage = {
      ids: [row.id],
      topic: `${topicRoot}${row.device}`,
      payload: '',
      retain: false,
    };
    out.push(message);
    const created: Group = { message, ts: row.ts, measurements: [...measurements], keys: new Set(keys) };
    open.set(groupKey, created);
    groups.push(created);
  }
  for (const g of groups) {
    g.message.payload = `{"ts":"${formatMicros(g.ts)}","measurements":${JSON.stringify(g.measurements)}}`;
  }
  return out;
}
