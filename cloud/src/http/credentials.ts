/**
 * Where a request carries its credentials: the `Authorization: Bearer` header, the `token` query
 * value (Shelly GET only) and the `os_session` cookie. Reading them is HTTP; what they are worth is
 * the authenticator's to decide (cloud/src/auth/authenticator.ts).
 */
export const SESSION_COOKIE = 'os_session';

/** `Bearer <token>` → the token (empty when the header is malformed), or null when the header is absent. */
export function bearerToken(header: string | undefined): string | null {
  if (header === undefined) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : '';
}

/**
 * A device token: the Bearer header, else (Shelly GET only, `allowQuery`) the `token` query value.
 * Null when neither is present.
 */
export function deviceToken(header: string | undefined, query: unknown, allowQuery: boolean): string | null {
  const token = bearerToken(header);
  if (token === null && allowQuery && typeof query === 'string') return query;
  return token;
}

/** A cookie's value from a `Cookie` header, or null when it is absent, empty or not URI-encoded. */
export function readCookie(header: string | undefined, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) {
      const value = part.slice(eq + 1).trim();
      if (value === '') return null;
      try {
        return decodeURIComponent(value);
      } catch {
        return null; // not a cookie we set: no session
      }
    }
  }
  return null;
}
