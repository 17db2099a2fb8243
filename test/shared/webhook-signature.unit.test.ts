import { createHmac } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { signWebhook, verifyWebhookSignature } from '../../shared/webhook-signature.ts';

const SECRET = 'whsec_test0123456789';
const BODY = '{"id":"whd_1","type":"alarm.opened","created_at":"2026-01-05T10:00:00Z","data":{"v":"°C"}}';
const T = 1_767_607_200;

describe('webhook signature helper', () => {
  it('signs as the spec says: base64 HMAC-SHA256 over "<t>." + raw body, keyed with the whole secret', () => {
    const expected = createHmac('sha256', SECRET).update(`${T}.${BODY}`).digest('base64');
    expect(signWebhook(SECRET, BODY, T)).toBe(`t=${T},v1=${expected}`);
    expect(signWebhook(SECRET, Buffer.from(BODY), T)).toBe(`t=${T},v1=${expected}`);
  });

  it('accepts within 300 seconds either way and rejects beyond', () => {
    const header = signWebhook(SECRET, BODY, T);
    for (const now of [T, T + 300, T - 300])
      expect(verifyWebhookSignature({ secret: SECRET, body: BODY, header, nowSeconds: now })).toEqual({
        ok: true,
        timestamp: T,
      });
    for (const now of [T + 301, T - 301])
      expect(verifyWebhookSignature({ secret: SECRET, body: BODY, header, nowSeconds: now })).toEqual({
        ok: false,
        reason: 'stale',
      });
  });

  it('rejects another body, another secret, and a signature for another timestamp', () => {
    const header = signWebhook(SECRET, BODY, T);
    const verify = (over: Partial<Parameters<typeof verifyWebhookSignature>[0]>) =>
      verifyWebhookSignature({ secret: SECRET, body: BODY, header, nowSeconds: T, ...over });
    expect(verify({ body: BODY.replace('opened', 'resolved') })).toEqual({ ok: false, reason: 'mismatch' });
    expect(verify({ body: `${BODY} ` })).toEqual({ ok: false, reason: 'mismatch' });
    expect(verify({ secret: 'whsec_other' })).toEqual({ ok: false, reason: 'mismatch' });
    const v1 = header.split(',v1=')[1];
    expect(verify({ header: `t=${T + 1},v1=${v1}`, nowSeconds: T + 1 })).toEqual({
      ok: false,
      reason: 'mismatch',
    });
  });

  it('accepts any of several v1 values (secret rotation) and tolerates spaces', () => {
    const good = signWebhook(SECRET, BODY, T).split(',v1=')[1];
    const other = signWebhook('whsec_old', BODY, T).split(',v1=')[1];
    const header = `t=${T}, v1=${other}, v1=${good}`;
    expect(verifyWebhookSignature({ secret: SECRET, body: BODY, header, nowSeconds: T })).toEqual({
      ok: true,
      timestamp: T,
    });
  });

  it.each([
    [undefined],
    [''],
    ['v1=abc'],
    [`t=${T}`],
    [`t=soon,v1=abc`],
    [`t=${T},v1=not base64!`],
    ['garbage'],
  ])('rejects the malformed header %p', (header) => {
    expect(verifyWebhookSignature({ secret: SECRET, body: BODY, header, nowSeconds: T })).toEqual({
      ok: false,
      reason: 'malformed',
    });
  });

  it('rejects a truncated signature without throwing', () => {
    const header = signWebhook(SECRET, BODY, T).slice(0, -8);
    expect(verifyWebhookSignature({ secret: SECRET, body: BODY, header, nowSeconds: T }).ok).toBe(false);
  });
});
