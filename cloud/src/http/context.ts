import type { Request } from 'express';
import type { Logger } from '../logger.ts';

/** Who is calling, once authentication has run. */
export type Scope = 'read' | 'write' | 'admin';

export type Principal =
  | { kind: 'user'; accountId: string; userId: string; tokenId: string; scope: Scope }
  | { kind: 'session'; accountId: string; userId: string; sessionId: string; scope: 'admin' }
  | { kind: 'device'; accountId: string; deviceId: string; siteId: string; localId: string; model: string };

export type UserPrincipal = Extract<Principal, { kind: 'user' | 'session' }>;
export type DevicePrincipal = Extract<Principal, { kind: 'device' }>;

export interface RequestContext {
  requestId: string;
  log: Logger;
  principal: Principal | null;
  /** The body exactly as received, for idempotency fingerprints and signatures. */
  rawBody: Buffer | null;
}

declare module 'express-serve-static-core' {
  interface Request {
    ctx: RequestContext;
  }
}

/** The account-scoped caller of a management route (the route table guarantees it is set). */
export function userOf(ctx: RequestContext): UserPrincipal {
  const p = ctx.principal;
  if (!p || p.kind === 'device') throw new Error('route declared user auth but no user principal is set');
  return p;
}

export function deviceOf(ctx: RequestContext): DevicePrincipal {
  const p = ctx.principal;
  if (!p || p.kind !== 'device') throw new Error('route declared device auth but no device principal is set');
  return p;
}

/** A path parameter as a string (Express types allow arrays for wildcard segments). */
export function param(req: Request, name: string): string {
  const value = req.params[name];
  return Array.isArray(value) ? value.join('/') : (value ?? '');
}
