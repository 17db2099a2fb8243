import { formatSeconds } from '../../../shared/time.ts';
import type { Db } from '../storage/database.ts';
import { ChainWalker, type ChainBreak } from './audit-chain.ts';
import type { AuditRepository } from './audit.repository.ts';

/** Entries read per query while walking a chain: memory stays flat however long the chain is. */
const VERIFY_PAGE = 1000;

export type VerifyBreak = ChainBreak | 'head_mismatch';

export type ChainVerification =
  | { ok: true; entries: number; head: { id: string; hash: string } | null }
  | {
      ok: false;
      entries_checked: number;
      first_broken: { id: string | null; ts: string | null; kind: string | null; reason: VerifyBreak };
    };

/**
 * Walks the account's audit chain from its first entry, a page at a time, and answers the first
 * broken link. The walk stops at the head read before it starts, so entries appended meanwhile are
 * left for the next check; the head itself must then be the last entry walked (`head_mismatch`
 * otherwise: entries were removed from the end, or the head was rewritten).
 */
export async function verifyAuditChain(
  db: Db,
  audit: AuditRepository,
  accountId: string,
): Promise<ChainVerification> {
  const head = await audit.chainHead(db, accountId);
  const walker = new ChainWalker();
  let after = 0;
  for (;;) {
    const rows = await audit.chainPage(
      db,
      accountId,
      after,
      head.entryId === null ? null : head.entries,
      VERIFY_PAGE,
    );
    for (const row of rows) {
      const reason = walker.next({ ...row, seq: row.seq! });
      if (reason)
        return {
          ok: false,
          entries_checked: walker.checked,
          first_broken: { id: row.id, ts: formatSeconds(row.ts), kind: row.kind, reason },
        };
    }
    if (rows.length < VERIFY_PAGE) break;
    after = rows[rows.length - 1]!.seq!;
  }
  const last = walker.last;
  if (last === null && head.entryId === null) return { ok: true, entries: 0, head: null };
  if (last && last.id === head.entryId && last.hash === head.hash && walker.checked === head.entries)
    return { ok: true, entries: walker.checked, head: last };
  const named = head.entryId ?? last?.id ?? null;
  const row = named === null ? undefined : await audit.find(db, accountId, named);
  return {
    ok: false,
    entries_checked: walker.checked,
    first_broken: {
      id: named,
      ts: row ? formatSeconds(row.ts) : null,
      kind: row?.kind ?? null,
      reason: 'head_mismatch',
    },
  };
}
