import { describe, expect, it } from '@jest/globals';
import type { QueuedMessage } from '../../gateway/src/buffer/reading-queue.ts';
import { buildMessages } from '../../gateway/src/uplink/outgoing.ts';

const ROOT = 'service/acc_x/';
const TS = Date.UTC(2026, 0, 5, 10) * 1000;
let id = 0;
const row = (
  device: string,
  body: unknown[],
  ts = TS,
  kind: QueuedMessage['kind'] = 'reading',
): QueuedMessage => ({
  id: ++id,
  device,
  kind,
  ts,
  body: JSON.stringify(body),
});
const m = (type: string, value: number, label?: string) => ({ type, value, ...(label ? { label } : {}) });

describe('buildMessages: queued rows to bridge messages', () => {
  it('puts readings of one device with the same ts into one payload, in row order', () => {
    const rows = [
      row('a', [m('temperature', 4)]),
      row('b', [m('temperature', 5)]),
      row('a', [m('humidity', 60)]),
    ];
    const out = buildMessages(rows, ROOT);
    expect(out.map((o) => [o.topic, o.ids])).toEqual([
      [`${ROOT}a`, [rows[0]!.id, rows[2]!.id]],
      [`${ROOT}b`, [rows[1]!.id]],
    ]);
    expect(JSON.parse(out[0]!.payload)).toEqual({
      ts: '2026-01-05T10:00:00.000000Z',
      measurements: [m('temperature', 4), m('humidity', 60)],
    });
  });

  it('never repeats a (type, label) in one payload and never exceeds 32 measurements', () => {
    const twice = buildMessages([row('a', [m('temperature', 4)]), row('a', [m('temperature', 4.5)])], ROOT);
    expect(twice).toHaveLength(2);
    const many = Array.from({ length: 40 }, (_, i) => row('a', [m('temperature', i, `p${i}`)]));
    expect(
      buildMessages(many, ROOT).map(
        (o) => (JSON.parse(o.payload) as { measurements: unknown[] }).measurements.length,
      ),
    ).toEqual([32, 8]);
  });

  it('sends states to .../lwt and info to .../info, retained, payload as queued', () => {
    const out = buildMessages(
      [row('a', [], TS, 'state'), row('a', [], TS, 'info')].map((r, i) => ({
        ...r,
        body: i ? '{"model":"x"}' : '{"status":"online"}',
      })),
      ROOT,
    );
    expect(out.map((o) => [o.topic, o.retain, o.payload])).toEqual([
      [`${ROOT}a/lwt`, true, '{"status":"online"}'],
      [`${ROOT}a/info`, true, '{"model":"x"}'],
    ]);
  });
});
