import type { IncomingMessage } from 'node:http';
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
