import { sql, type SelectQueryBuilder } from 'kysely';

/** A row's place in a list ordered by an integer time, then the id: what a cursor encodes. */
export type CursorKey = readonly [sortValue: number, id: string];

/** One page of a keyset-paged list: at most `limit` rows after the row `after` (from the start when null). */
export interface PageRequest {
  limit: number;
  after: CursorKey | null;
}

/**
 * Keyset pagination over (sortColumn, id): stable under inserts, and each page is an index range scan.
 * Fetches `limit + 1` rows so `toPage` can tell whether another page exists.
 */
export function keysetPage<DB, TB extends keyof DB, O>(
  qb: SelectQueryBuilder<DB, TB, O>,
  sortColumn: string,
  idColumn: string,
  order: 'asc' | 'desc',
  page: PageRequest,
): SelectQueryBuilder<DB, TB, O> {
  const sort = sql.ref(sortColumn);
  const id = sql.ref(idColumn);
  let q = qb;
  const after: CursorKey | null = page.after;
  if (after && after.length === 2) {
    const [sortValue, idValue] = after;
    q =
      order === 'asc'
        ? q.where(sql<boolean>`(${sort} > ${sortValue} OR (${sort} = ${sortValue} AND ${id} > ${idValue}))`)
        : q.where(sql<boolean>`(${sort} < ${sortValue} OR (${sort} = ${sortValue} AND ${id} < ${idValue}))`);
  }
  return q
    .orderBy(sql`${sort} ${sql.raw(order)}`)
    .orderBy(sql`${id} ${sql.raw(order)}`)
    .limit(page.limit + 1);
}
