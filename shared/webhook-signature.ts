import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The signature of an outbound webhook delivery (docs/api/rules.md, item 5):
 * `X-Service-Signature: t=<unix_seconds>,v1=<base64 HMAC-SHA256(secret, "<t>." + raw body)>`.
 * The key is the whole signing secret, `whsec_` included, as UTF-8 (docs/api.md).
 * Receivers use `verifyWebhookSignature`: it rejects a timestamp more than 300 s away from now and
 * compares signatures in constant time.
 */
export const SIGNATURE_HEADER = 'X-Service-Signature';
export const SIGNATURE_TOLERANCE_SECONDS = 300;

function hmac(secret: string, timestamp: number, body: string | Buffer): Buffer {
  return createHmac('sha256', Buffer.from(secret, 'utf8'))
    .update(`${timestamp}.`, 'utf8')
    .update(typeof body === 'string' ? Buffer.from(body, 'utf8') : body)
    .digest();
}

/** The header value for `body` signed at `timestamp` (unix seconds). */
export function signWebhook(secret: string, body: string | Buffer, timestamp: number): string {
  return `t=${timestamp},v1=${hmac(secret, timestamp, body).toString('base64')}`;
}

export type VerifyResult =
  { ok: true; timestamp: number } | { ok: false; reason: 'malformed' | 'stale' | 'mismatch' };

/**
 * Checks a delivery as a receiver should: the header is well formed, its `t` is within `tolerance`
 * seconds of `nowSeconds`, and one of its `v1` values is the HMAC of the raw body (several `v1` are
 * allowed, for a sender rotating its secret). `body` must be the bytes received, not re-encoded JSON.
 */
export function verifyWebhookSignature(input: {
  secret: string;
  body: string | Buffer;
  header: string | null | undefined;
  nowSeconds?: number;
  toleranceSeconds?: number;
}): VerifyResult {
  const { secret, body, header } = input;
  if (!header) return { ok: false, reason: 'malformed' };
  let timestamp: number | null = null;
  const signatures: Buffer[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) return { ok: false, reason: 'malformed' };
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't') {
      if (!/^\d{1,12}$/.test(value)) return { ok: false, reason: 'malformed' };
      timestamp = Number(value);
    } else if (key === 'v1') {
      if (!/^[A-Za-z0-9+/]+={0,2}$/.test(value)) return { ok: false, reason: 'malformed' };
      signatures.push(Buffer.from(value, 'base64'));
    }
  }
  if (timestamp === null || signatures.length === 0) return { ok: false, reason: 'malformed' };
  const now = input.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - timestamp) > (input.toleranceSeconds ?? SIGNATURE_TOLERANCE_SECONDS)) {
    return { ok: false, reason: 'stale' };
  }
  const expected = hmac(secret, timestamp, body);
  // Every candidate is compared, in constant time each (the length of an HMAC is no secret).
  let match = false;
  for (const candidate of signatures) {
    if (candidate.length === expected.length && timingSafeEqual(candidate, expected)) match = true;
  }
  return match ? { ok: true, timestamp } : { ok: false, reason: 'mismatch' };
}
