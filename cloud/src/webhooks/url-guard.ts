import dns from 'node:dns';
import type { LookupAddress } from 'node:dns';
import ipaddr from 'ipaddr.js';
import { Unprocessable } from '../errors.ts';

/**
 * Outbound webhooks must not reach the service's own network (decisions, "Clarifications"): a URL
 * whose host is, or resolves to, anything but a public unicast address (loopback, private,
 * link-local, unique-local, carrier-grade NAT, multicast, reserved...) is refused with 422
 * `invalid_webhook_url`, at registration and again at each delivery, unless WEBHOOK_ALLOW_PRIVATE.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  // process(): an IPv4-mapped IPv6 address (::ffff:127.0.0.1) is judged as the IPv4 address it is.
  return ipaddr.process(address).range() === 'unicast';
}

export function invalidWebhookUrl(message: string): Unprocessable {
  return new Unprocessable('invalid_webhook_url', message, [{ path: 'url', message }]);
}

/** The URL as delivered to: http(s), no fragment; throws 422 `invalid_webhook_url`. */
export function parseWebhookUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw invalidWebhookUrl('url must be an absolute http or https URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw invalidWebhookUrl('url must be an http or https URL');
  }
  if (url.hash) throw invalidWebhookUrl('url must not have a fragment');
  return url;
}

/** The URL's host as a bare name or address (IPv6 without brackets). */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/** Resolves the host and refuses it unless every address it resolves to is public. */
export async function checkWebhookHost(url: URL, allowPrivate: boolean): Promise<void> {
  if (allowPrivate) return;
  const host = hostOf(url);
  let addresses: LookupAddress[];
  try {
    addresses = ipaddr.isValid(host)
      ? [{ address: host, family: host.includes(':') ? 6 : 4 }]
      : await dns.promises.lookup(host, { all: true, verbatim: true });
  } catch {
    throw invalidWebhookUrl(`the host ${host} does not resolve`);
  }
  const blocked = addresses.find((a) => !isPublicAddress(a.address));
  if (addresses.length === 0 || blocked) {
    throw invalidWebhookUrl(
      `the host ${host} resolves to ${blocked?.address ?? 'nothing'}, a loopback, private or link-local address; webhooks must reach a public address (or set WEBHOOK_ALLOW_PRIVATE=true)`,
    );
  }
}

/**
 * A `lookup` for http.request that refuses non-public addresses: the address checked is the one
 * connected to, so a name that resolves differently at delivery time (DNS rebinding) is caught.
 */
export function guardedLookup(allowPrivate: boolean): typeof dns.lookup {
  const lookup = (hostname: string, options: dns.LookupOptions, callback: (...args: unknown[]) => void) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err);
      const list = addresses;
      const bad = allowPrivate ? undefined : list.find((a) => !isPublicAddress(a.address));
      if (bad || list.length === 0) {
        const refused = Object.assign(
          new Error(`refused to connect to ${bad?.address ?? hostname}: not a public address`),
          {
            code: 'EWEBHOOKPRIVATE',
          },
        );
        return callback(refused);
      }
      if (options.all) return callback(null, list);
      return callback(null, list[0]!.address, list[0]!.family);
    });
  };
  return lookup as unknown as typeof dns.lookup;
}
