import { createHash } from 'node:crypto';

/** What an audit entry's hash covers: its content and the hash of the account's entry before it. */
export interface ChainedFields {
  prev_hash: string | null;
  account_id: string;
  seq: number;
  id: string;
  ts: number;
  kind: string;
  actor: string;
  target: string;
  /** The stored JSON text, byte for byte (not re-serialised: key order is part of what is signed). */
  details: string;
}

/**
 * Lower-case hex SHA-256 of the entry's canonical serialisation: the JSON array of its fields in a
 * fixed order. JSON gives strings one unambiguous encoding and separates the fields, so no two
 * different entries serialise alike; times and sequence numbers are integers.
 */
export function entryHash(e: ChainedFields): string {
  const canonical = JSON.stringify([
    e.prev_hash,
    e.account_id,
    e.seq,
    e.id,
    e.ts,
    e.kind,
    e.actor,
    e.target,
    e.details,
  ]);
  return createHash('sha256').update(canonical, 'utf8').digest('hex');
}

export type ChainBreak = 'hash_mismatch' | 'prev_hash_mismatch' | 'seq_gap';

/**
 * Checks chain links one after the other, in `seq` order: each entry must be the next number,
 * name the previous entry's hash, and hash to what it stores. Returns the first broken link's
 * reason, or null while the chain holds.
 */
export class ChainWalker {
  private expectedSeq = 1;
  private prevHash: string | null = null;
  checked = 0;
  last: { id: string; hash: string } | null = null;

  next(e: ChainedFields & { hash: string | null }): ChainBreak | null {
    this.checked += 1;
    if (e.seq !== this.expectedSeq) return 'seq_gap';
    if (e.prev_hash !== this.prevHash) return 'prev_hash_mismatch';
    if (e.hash !== entryHash(e)) return 'hash_mismatch';
    this.expectedSeq += 1;
    this.prevHash = e.hash;
    this.last = { id: e.id, hash: e.hash };
    return null;
  }
}
