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
 * Turns queued rows (oldest first) into bridge messages (docs/api/mqtt.md):
 * readings of one device with the same `ts` share one measurement payload of up to 32
 * measurements, to cut messages; a (type, label) seen twice starts a new payload so no message
 * carries the same content key twice. States go to `.../lwt` and info to `.../info`, both retained.
 * Messages keep the order of their first row.
 */
export function buildMessages(rows: readonly QueuedMessage[], topicRoot: string): OutgoingMessage[] {
  interface Group {
    message: OutgoingMessage;
    ts: number;
    /** The rows' measurement arrays as stored (JSON text): most groups hold one and are never parsed. */
    bodies: string[];
    /** (type, label) keys and count, computed only once a second row wants to join. */
    keys: Set<string> | null;
    count: number;
  }
  const keysOf = (body: string) =>
    (JSON.parse(body) as WireMeasurement[]).map((m) => `${m.type}\u0000${m.label ?? ''}`);
  const out: OutgoingMessage[] = [];
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
    const groupKey = `${row.device}\u0000${row.ts}`;
    const group = open.get(groupKey);
    if (group) {
      if (group.keys === null) {
        const first = keysOf(group.bodies[0]!);
        group.keys = new Set(first);
        group.count = first.length;
      }
      const keys = keysOf(row.body);
      if (group.count + keys.length <= MAX_MEASUREMENTS && !keys.some((k) => group.keys!.has(k))) {
        group.message.ids.push(row.id);
        group.bodies.push(row.body);
        for (const k of keys) group.keys.add(k);
        group.count += keys.length;
        continue;
      }
    }
    const message: OutgoingMessage = {
      ids: [row.id],
      topic: `${topicRoot}${row.device}`,
      payload: '',
      retain: false,
    };
    out.push(message);
    const created: Group = { message, ts: row.ts, bodies: [row.body], keys: null, count: 0 };
    open.set(groupKey, created);
    groups.push(created);
  }
  for (const g of groups) {
    const measurements =
      g.bodies.length === 1 ? g.bodies[0]! : `[${g.bodies.map((b) => b.slice(1, -1)).join(',')}]`;
    g.message.payload = `{"ts":"${formatMicros(g.ts)}","measurements":${measurements}}`;
  }
  return out;
}
