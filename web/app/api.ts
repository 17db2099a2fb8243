/**
 * The dashboard's one way to the cloud: JSON under `/app/api` with the session cookie. Every
 * state-changing request carries `X-Requested-With: XMLHttpRequest`, which the cloud demands there
 * (a foreign page cannot add it without a CORS preflight the cloud never grants).
 */

export const API_BASE = '/app/api';

/** An answer in the cloud's error envelope: `{error: {code, message, details?}}`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: unknown = undefined,
  ) {
    super(message);
  }

  /**
   * The message for one field: from the error's `details` (`[{path, message}]`) when they name it.
   * An error whose details name fields belongs to those only ("`to` must be after `from`" is the
   * field `to`'s, though its message names both); one without falls back to the whole message when
   * the message starts with the field's name, as the cloud's messages about one field do ("timezone
   * must be an IANA time zone name" is the field `timezone`'s, not `name`'s). A field is named by its
   * path or a path inside it: `recipients` by `recipients.2`, `public.lat` by itself.
   */
  fieldMessage(field: string): string | null {
    const named = this.namedDetails();
    for (const d of named) {
      const inside = d.path === field || d.path.startsWith(`${field}.`);
      if (inside && typeof d.message === 'string') return d.message;
    }
    if (named.length > 0) return null;
    const start = this.message.replace(/^`/, '');
    return start.startsWith(field) && !/\w/.test(start.charAt(field.length)) ? this.message : null;
  }

  /** The `details` that name a field (`path`, as `recipients.2`), with their messages. */
  namedDetails(): { path: string; message?: unknown }[] {
    const details = Array.isArray(this.details)
      ? (this.details as { path?: unknown; message?: unknown }[])
      : [];
    return details.filter(
      (d): d is { path: string; message?: unknown } => typeof d.path === 'string' && d.path !== '',
    );
  }
}

/** Listeners told when an answer says the session is gone (401), so the app can ask to sign in. */
const signedOutListeners = new Set<() => void>();
export function onSignedOut(listener: () => void): () => void {
  signedOutListeners.add(listener);
  return () => signedOutListeners.delete(listener);
}

type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';

async function request<T>(method: Method, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (method !== 'GET') headers['X-Requested-With'] = 'XMLHttpRequest';
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(`${API_BASE}${path}`, {
      method,
      headers,
      credentials: 'same-origin',
      body: body === undefined ? null : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, 'network', 'The cloud cannot be reached. Check the connection and try again.');
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let json: unknown = undefined;
  if (text) {
    try {
      json = JSON.parse(text);
    } catch {
      throw new ApiError(res.status, 'bad_answer', `The cloud answered ${res.status} without JSON.`);
    }
  }
  if (!res.ok) {
    const error = (json as { error?: { code?: string; message?: string; details?: unknown } })?.error;
    const failure = new ApiError(
      res.status,
      error?.code ?? 'http_' + res.status,
      error?.message ?? `The cloud answered ${res.status}.`,
      error?.details,
    );
    if (res.status === 401 && !path.startsWith('/auth/')) for (const l of signedOutListeners) l();
    throw failure;
  }
  return json as T;
}

export const api = {
  get: <T>(path: string) => request<T>('GET', path),
  post: <T>(path: string, body?: unknown) => request<T>('POST', path, body ?? {}),
  patch: <T>(path: string, body: unknown) => request<T>('PATCH', path, body),
  put: <T>(path: string, body: unknown) => request<T>('PUT', path, body),
  del: (path: string) => request<void>('DELETE', path),
};

/** A list answer: `{data, next_cursor, has_more}`. */
export interface Page<T> {
  data: T[];
  next_cursor: string | null;
  has_more: boolean;
}

/** Every item of a paged list, following `next_cursor` (for short lists such as sites). */
export async function all<T>(path: string): Promise<T[]> {
  const items: T[] = [];
  let cursor: string | null = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const page: Page<T> = await api.get<Page<T>>(
      cursor ? `${path}${sep}cursor=${encodeURIComponent(cursor)}` : path,
    );
    items.push(...page.data);
    cursor = page.has_more ? page.next_cursor : null;
  } while (cursor);
  return items;
}

/** `encodeURIComponent` for path segments of ids that come from answers. */
export const seg = (s: string) => encodeURIComponent(s);
