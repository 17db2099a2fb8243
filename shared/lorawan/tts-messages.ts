import { z } from 'zod';
import { parseTimestampMicros } from '../time.ts';

/**
 * The Things Stack v3 webhook messages: `uplink_message` and `join_accept`. TTS omits every empty,
 * zero or false field, so `f_cnt`, `f_port`, `frm_payload`, `rx_metadata` and even `dev_eui` (a
 * device registered without one) may be missing and default here.
 */
export interface TtsMessage {
  kind: 'uplink' | 'join' | 'other';
  /** Lower-case hex; null when the device has no DevEUI. */
  devEui: string | null;
  /** The key of this uplink across redeliveries: its `as:up:` correlation id, else all of them. */
  uplinkKey: string;
  /** The gateways' reception time, else the network's `received_at`; null when absent. */
  time: number | null;
  fCnt: number;
  fPort: number;
  data: Buffer;
  decoded: Record<string, unknown> | null;
  rssi: number | null;
}

export class TtsMessageError extends Error {}

const RxMetadata = z
  .object({
    time: z.string().optional(),
    rssi: z.number().optional(),
    channel_rssi: z.number().optional(),
  })
  .loose();

const TtsJson = z
  .object({
    end_device_ids: z
      .object({
        device_id: z.string().optional(),
        dev_eui: z
          .string()
          .regex(/^[0-9a-fA-F]{16}$/)
          .optional(),
      })
      .loose(),
    correlation_ids: z.array(z.string()).default([]),
    received_at: z.string().optional(),
    uplink_message: z
      .object({
        f_cnt: z.number().int().default(0),
        f_port: z.number().int().default(0),
        frm_payload: z.string().default(''),
        decoded_payload: z.record(z.string(), z.unknown()).optional(),
        rx_metadata: z.array(RxMetadata).default([]),
        received_at: z.string().optional(),
      })
      .loose()
      .optional(),
    join_accept: z.object({}).loose().optional(),
  })
  .loose();

function micros(text: string | undefined): number | null {
  return text ? parseTimestampMicros(text) : null;
}

export function parseTtsMessage(payload: Buffer): TtsMessage {
  let raw: unknown;
  try {
    raw = JSON.parse(payload.toString('utf8'));
  } catch {
    throw new TtsMessageError('the message is not JSON');
  }
  const parsed = TtsJson.safeParse(raw);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    throw new TtsMessageError(`not a TTS message: ${first.path.join('.') || 'body'}: ${first.message}`);
  }
  const m = parsed.data;
  const up = m.uplink_message;
  const rx = up?.rx_metadata ?? [];
  const gatewayTimes = rx.map((r) => micros(r.time)).filter((t) => t !== null);
  const rssis = rx.flatMap((r) => {
    const v = r.rssi ?? r.channel_rssi;
    return typeof v === 'number' ? [v] : [];
  });
  const correlation = m.correlation_ids.find((c) => c.startsWith('as:up:')) ?? m.correlation_ids.join(' ');
  return {
    kind: up ? 'uplink' : m.join_accept ? 'join' : 'other',
    devEui: m.end_device_ids.dev_eui?.toLowerCase() ?? null,
    uplinkKey: correlation,
    time:
      (gatewayTimes.length > 0 ? Math.min(...gatewayTimes) : null) ??
      micros(up?.received_at) ??
      micros(m.received_at),
    fCnt: up?.f_cnt ?? 0,
    fPort: up?.f_port ?? 0,
    data: Buffer.from(up?.frm_payload ?? '', 'base64'),
    decoded: up?.decoded_payload ?? null,
    rssi: rssis.length > 0 ? Math.max(...rssis) : null,
  };
}
