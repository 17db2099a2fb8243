import dns from 'node:dns';
import type { LookupAddress } from 'node:dns';
import ipaddr from 'ipaddr.js';
import { Unprocessable } from '../errors.ts';

/**
 * IPv4 ranges that are not globally reachable, from the IANA IPv4 Special-Purpose Address Registry,
 * plus multicast and the reserved 240.0.0.0/4 (which holds the broadcast address).
 */
const IPV4_NOT_GLOBAL = [
  '0.0.0.0/8', // "this network"
  '10.0.0.0/8', // private (RFC 1918)
  '100.64.0.0/10', // carrier-grade NAT (RFC 6598)
  '127.0.0.0/8', // loopback
  '169.254.0.0/16', // link-local
  '172.16.0.0/12', // private
  '192.0.0.0/24', // IETF protocol assignments
  '192.0.2.0/24', // documentation (TEST-NET-1)
  '192.31.196.0/24', // AS112
  '192.52.193.0/24', // AMT
  '192.88.99.0/24', // 6to4 relay anycast (deprecated)
  '192.168.0.0/16', // private
  '192.175.48.0/24', // AS112
  '198.18.0.0/15', // benchmarking (RFC 2544)
  '198.51.100.0/24', // documentation (TEST-NET-2)
  '203.0.113.0/24', // documentation (TEST-NET-3)
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved, and 255.255.255.255
].map((cidr) => ipaddr.IPv4.parseCIDR(cidr));

/**
 * Global unicast (RFC 4291). Every IPv6 address outside it is something else: loopback, unspecified,
 * IPv4-compatible (`::7f00:1`), link-local, unique-local, multicast, discard-only or unassigned.
 */
const IPV6_GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');

/** Inside 2000::/3, yet not a host a webhook should reach. */
const IPV6_NOT_GLOBAL = [
  '2001::/23', // IETF protocol assignments: Teredo 2001::/32, benchmarking 2001:2::/48, ORCHID...
  '2001:db8::/32', // documentation
  '2002::/16', // 6to4: a tunnel to whatever IPv4 address it embeds
  '3fff::/20', // documentation (RFC 9637)
].map((cidr) => ipaddr.IPv6.parseCIDR(cidr));

/**
 * IPv6 forms whose last 32 bits are the IPv4 address actually reached: IPv4-mapped (a dual-stack
 * socket connects to the IPv4 address) and NAT64's well-known prefix (RFC 6052; an IPv6-only network
 * with DNS64 reaches every IPv4-only receiver this way). They are judged as that IPv4 address.
 */
const IPV6_EMBEDDING_IPV4 = ['::ffff:0:0/96', '64:ff9b::/96'].map((cidr) => ipaddr.IPv6.parseCIDR(cidr));

function isGlobalIpv4(ip: ipaddr.IPv4): boolean {
  return !IPV4_NOT_GLOBAL.some((range) => ip.match(range));
}

/**
 * Outbound webhooks must not reach the service's own network (docs/api.md). Only a
 * globally reachable unicast address passes: an IPv4 address outside every special-purpose range, or
 * an IPv6 address in 2000::/3 outside Teredo, 6to4, benchmarking and documentation, or an IPv6 form
 * that embeds a passing IPv4 address. Everything else (loopback, private, link-local, unique-local,
 * carrier-grade NAT, multicast, reserved, IPv4 hidden in IPv6) is refused with 422
 * `invalid_webhook_url`, at registration and again at each delivery, unless WEBHOOK_ALLOW_PRIVATE.
 * The tables are explicit rather than ipaddr.js's `range()`, whose names and coverage change
 * between its versions.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const ip = ipaddr.parse(address);
  if (ip.kind() === 'ipv4') return isGlobalIpv4(ip as ipaddr.IPv4);
  const v6 = ip as ipaddr.IPv6;
  if (IPV6_EMBEDDING_IPV4.some((range) => v6.match(range))) {
    return isGlobalIpv4(ipaddr.fromByteArray(v6.toByteArray().slice(12)) as ipaddr.IPv4);
  }
  return v6.match(IPV6_GLOBAL_UNICAST) && !IPV6_NOT_GLOBAL.some((range) => v6.match(range));
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

/**
 * Resolves the host and refuses it unless every address it resolves to is public. The message names
 * the host as given, never the address a name resolved to, and is the same whether a name does not
 * resolve or resolves to a private address: either would map the service's internal names for
 * whoever may register a webhook. Lifting the guard is the operator's setting, so the user's message
 * does not name it.
 */
export async function checkWebhookHost(url: URL, allowPrivate: boolean): Promise<void> {
  if (allowPrivate) return;
  const host = hostOf(url);
  let addresses: LookupAddress[];
  try {
    addresses = ipaddr.isValid(host)
      ? [{ address: host, family: host.includes(':') ? 6 : 4 }]
      : await dns.promises.lookup(host, { all: true, verbatim: true });
  } catch {
    addresses = [];
  }
  const blocked = addresses.find((a) => !isPublicAddress(a.address));
  if (addresses.length === 0 || blocked) {
    throw invalidWebhookUrl(
      ipaddr.isValid(host)
        ? `${host} is not a public address: webhooks and chat posts go to addresses on the internet only`
        : `the host ${host} does not resolve, or resolves to an address that is not public: webhooks and chat posts go to addresses on the internet only`,
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
      if (err && allowPrivate) return callback(err);
      const list = err ? [] : addresses;
      const bad = allowPrivate ? undefined : list.find((a) => !isPublicAddress(a.address));
      if (bad || list.length === 0) {
        // The delivery's error is shown to the account: the host, not the address it resolved to,
        // and one message whether it resolved or not (no map of internal names).
        const refused = Object.assign(
          new Error(
            `refused to connect to ${hostname}: it does not resolve, or resolves to an address that is not public`,
          ),
          { code: 'EWEBHOOKPRIVATE' },
        );
        return callback(refused);
      }
      if (options.all) return callback(null, list);
      return callback(null, list[0]!.address, list[0]!.family);
    });
  };
  return lookup as unknown as typeof dns.lookup;
}
