import { z } from 'zod';

/**
 * The MQTT bridge's wire format (docs/api/mqtt.md), shared by the
 * cloud (which enforces it) and the gateway (which speaks it): topic names, payload schemas and the
 * PUBACK reason codes the cloud answers with.
 *
 *   service/<account_id>/<device>               measurement payload (QoS 1, retain false)
 *   service/<account_id>/<device>/lwt           last-will / online status (QoS 1, retain true)
 *   service/<account_id>/<device>/info          firmware version and model (QoS 1, retain true)
 *   service/<account_id>/<device>/cmd/identify  downlink: blink the LED for 30 s (QoS 1)
 *   service/<account_id>/<device>/cmd/cadence   downlink placeholder (never sent yet)
 *
 * `<device>` is a `dev_` id of the account, or a `local_id` on the bridge's site.
 */
export const TOPIC_PREFIX = 'service';

/**
 * The largest MQTT packet the cloud's bridge takes (announced in CONNACK; above it: DISCONNECT 0x95):
 * a payload as large as the HTTP ingest body limit (256 KiB), which any valid measurement batch fits
 * many times over, plus room for the topic and properties.
 */
export const MAX_PACKET_BYTES = 256 * 1024 + 4096;

/** `service/<account_id>/`: everything a bridge certificate may publish or subscribe under. */
export function topicRoot(accountId: string): string {
  return `${TOPIC_PREFIX}/${accountId}/`;
}

export type UplinkKind = 'measurement' | 'lwt' | 'info';
export type CommandName = 'identify' | 'cadence';
export const COMMANDS: readonly CommandName[] = ['identify', 'cadence'];

export type ParsedTopic =
  | { kind: UplinkKind; accountId: string; device: string }
  | { kind: 'cmd'; accountId: string; device: string; command: string }
  | { kind: 'invalid'; reason: string };

/** Names what a topic under `service/` is; anything else (wrong depth, unknown suffix) is `invalid`. */
export function parseTopic(topic: string): ParsedTopic {
  const parts = topic.split('/');
  if (parts[0] !== TOPIC_PREFIX || parts.length < 3) {
    return { kind: 'invalid', reason: `topics are ${TOPIC_PREFIX}/<account_id>/<device>[/lwt|/info]` };
  }
  const [, accountId, device] = parts as [string, string, string];
  if (accountId === '' || device === '') return { kind: 'invalid', reason: 'empty topic level' };
  if (parts.length === 3) return { kind: 'measurement', accountId, device };
  if (parts.length === 4 && (parts[3] === 'lwt' || parts[3] === 'info')) {
    return { kind: parts[3], accountId, device };
  }
  if (parts.length === 5 && parts[3] === 'cmd' && parts[4] !== '') {
    return { kind: 'cmd', accountId, device, command: parts[4]! };
  }
  return {
    kind: 'invalid',
    reason: `unknown topic ${JSON.stringify(parts.slice(3).join('/'))} after the device: use none, lwt or info`,
  };
}

export function measurementTopic(accountId: string, device: string): string {
  return `${topicRoot(accountId)}${device}`;
}

export function lwtTopic(accountId: string, device: string): string {
  return `${topicRoot(accountId)}${device}/lwt`;
}

export function infoTopic(accountId: string, device: string): string {
  return `${topicRoot(accountId)}${device}/info`;
}

export function commandTopic(accountId: string, device: string, command: CommandName): string {
  return `${topicRoot(accountId)}${device}/cmd/${command}`;
}

const rfc3339 = z
  .string()
  .regex(
    /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i,
    'must be an RFC 3339 timestamp with an offset',
  );

/** `{status: 'offline', reason, at}` (the last-will) or `{status: 'online', at}`. */
export const LwtPayload = z.discriminatedUnion('status', [
  z.object({ status: z.literal('offline'), reason: z.string().max(256).optional(), at: rfc3339.optional() }),
  z.object({ status: z.literal('online'), at: rfc3339.optional() }),
]);
export type LwtPayload = z.infer<typeof LwtPayload>;

/** Firmware version and model, one-shot and retained. Both optional; unknown fields are ignored. */
export const InfoPayload = z.object({
  fw_version: z.string().min(1).max(64).optional(),
  model: z.string().min(1).max(64).optional(),
});
export type InfoPayload = z.infer<typeof InfoPayload>;

/** `cmd/identify`: blink for `duration_s` seconds (docs/api.md: 30 s). */
export const IdentifyCommand = z.object({ duration_s: z.number().int().positive(), at: rfc3339 });
export type IdentifyCommand = z.infer<typeof IdentifyCommand>;

/**
 * The MQTT 5 reason codes the cloud answers a PUBLISH with (PUBACK, or PUBREC for QoS 2). The reason
 * string starts with the error code of the HTTP API (`out_of_range: ...`).
 *
 * Permanent (the gateway drops the reading, resending it can never succeed): 0x83, 0x87, 0x90, 0x99.
 * Transient (keep it and retry with backoff): 0x80, 0x97.
 */
export const ReasonCode = {
  success: 0x00,
  unspecifiedError: 0x80,
  implementationSpecificError: 0x83,
  notAuthorized: 0x87,
  topicNameInvalid: 0x90,
  quotaExceeded: 0x97,
  payloadFormatInvalid: 0x99,
} as const;
export type ReasonCode = (typeof ReasonCode)[keyof typeof ReasonCode];

/** Whether a failed PUBACK means "never resend this message". */
export function isPermanentRejection(code: number): boolean {
  return code === 0x83 || code === 0x87 || code === 0x90 || code === 0x99;
}
