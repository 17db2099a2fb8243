import type { IncomingMessage } from 'node:http';
import ipaddr from 'ipaddr.js';
import proxyaddr from 'proxy-addr';
import type { Config } from '../config.ts';

/** Whether the proxy at `address`, `hop` steps from the server (0: the socket's peer), is trusted. */
export type TrustProxy = (address: string, hop: number) => boolean;

/**
 * The trust rule of `TRUST_PROXY`, the same for Express (`trust proxy`, hence `req.ip`) and the
 * ingest fast path: a hop count trusts that many proxies nearest the server; a list trusts the
 * proxies at those addresses; none trusts no one.
 */
export function trustProxy(config: Pick<Config, 'trustProxy'>): TrustProxy {
  const spec = config.trustProxy;
  if (spec === null) return () => false;
  if (typeof spec === 'number') return (_address, hop) => hop < spec;
  return proxyaddr.compile([...spec]);
}

/**
 * The client's address: the socket's peer, or, through trusted proxies, the nearest untrusted
 * address `X-Forwarded-For` names. Every per-address decision (sign-in limits) and the access log
 * use it, so behind a proxy clients do not share one budget.
 */
export function clientAddress(req: IncomingMessage, trust: TrustProxy): string {
  return proxyaddr(req, trust);
}

/**
 * The budget an address counts against in a per-address limit: an IPv4 address itself (an
 * IPv4-mapped IPv6 address as that IPv4 address), an IPv6 address its /64. One IPv6 client holds a
 * whole /64 (2^64 addresses), so counting each address apart would give it a fresh budget per
 * request.
 */
export function addressBudget(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const parts = (parsed as ipaddr.IPv6).parts.slice(0, 4);
  return `${parts.map((p) => p.toString(16)).join(':')}::/64`;
}
