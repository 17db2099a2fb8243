import { z } from 'zod';
import { InvalidRequest } from '../errors.ts';
import type { CursorKey, PageRequest } from '../storage/keyset.ts';

/**
 * Cursor pagination (docs/api.md): `limit` 1..500 (default 100), an opaque `cursor`,
 * and `{data, next_cursor, has_more}`. A cursor is the sort key of the last row, base64url-encoded:
 * every list here is ordered by an integer time and then the id (see `storage/keyset.ts`).
 */
export const MAX_LIMIT = 500;
export const DEFAULT_LIMIT = 100;

export interface Page<T> {
  data: T[];
  next_cursor: string | null;
  has_more: boolean;
}

export const pageQuerySchema = {
  limit: z.coerce.number().int().min(1).max(MAX_LIMIT).default(DEFAULT_LIMIT),
  cursor: z.string().max(1024).optional(),
};

/** The sort key of every list ordered by creation: its integer `created_at`, then the id. */
export function byCreation(row: { created_at: number; id: string }): CursorKey {
  return [row.created_at, row.id];
}

export function encodeCursor(key: CursorKey): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

export function decodeCursor(cursor: string | undefined): CursorKey | null {
  if (cursor === undefined) return null;
  try {
    const key: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    // Only the shape we issue: anything else would page wrongly, or fail in the database (500 on PostgreSQL).
    if (Array.isArray(key) && key.length === 2 && Number.isSafeInteger(key[0]) && typeof key[1] === 'string')
      return [key[0] as number, key[1]];
  } catch {
    // fall through: a cursor we did not make
  }
  throw new InvalidRequest('invalid_request', 'cursor is not one this service issued', [
    { path: 'cursor', message: 'malformed cursor' },
  ]);
}

export function pageRequest(query: { limit: number; cursor?: string | undefined }): PageRequest {
  return { limit: query.limit, after: decodeCursor(query.cursor) };
}

/**
 * Builds the envelope from `limit + 1` fetched rows: the extra row only says whether there is more,
 * so the last page has `has_more: false` and there is never a trailing empty page.
 */
export function toPage<R, T>(
  rows: R[],
  limit: number,
  keyOf: (row: R) => CursorKey,
  view: (row: R) => T,
): Page<T> {
  const hasMore = rows.length > limit;
  const pageRows = hasMore ? rows.slice(0, limit) : rows;
  const last = pageRows[pageRows.length - 1];
  return {
    data: pageRows.map(view),
    next_cursor: hasMore && last !== undefined ? encodeCursor(keyOf(last)) : null,
    has_more: hasMore,
  };
}
