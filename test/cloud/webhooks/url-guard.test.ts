import { describe, expect, it } from '@jest/globals';
import { guardedLookup } from '../../../cloud/src/webhooks/url-guard.ts';

/**
 * The connect-time guard of deliveries (cloud/src/webhooks/url-guard.ts): its error becomes the
 * delivery's error, which the account reads in `GET /v1/webhooks/{id}/deliveries`.
 */
describe('guardedLookup', () => {
  const lookup = (allowPrivate: boolean, host: string) =>
    new Promise<{ err: (Error & { code?: string }) | null; addresses: unknown }>((resolve) =>
      (
        guardedLookup(allowPrivate) as unknown as (
          h: string,
          o: object,
          cb: (err: Error | null, addresses?: unknown) => void,
        ) => void
      )(host, { all: true }, (err, addresses) => resolve({ err, addresses })),
    );

  it('refuses a name that resolves to a loopback address, naming the host and not the address', async () => {
    const { err } = await lookup(false, 'localhost');
    expect(err?.code).toBe('EWEBHOOKPRIVATE');
    expect(err?.message).toContain('localhost');
    expect(err?.message).not.toMatch(/127\.0\.0\.1|::1/);
  });

  it('says the same of a name that does not resolve', async () => {
    const missing = await lookup(false, 'no-such-host.invalid');
    const loopback = await lookup(false, 'localhost');
    expect(missing.err?.message.replace('no-such-host.invalid', 'HOST')).toBe(
      loopback.err?.message.replace('localhost', 'HOST'),
    );
  });

  it('connects to it when the operator allows private addresses', async () => {
    const { err, addresses } = await lookup(true, 'localhost');
    expect(err).toBeNull();
    expect(Array.isArray(addresses) && addresses.length > 0).toBe(true);
  });
});
