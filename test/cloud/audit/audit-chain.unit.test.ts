import { describe, expect, it } from '@jest/globals';
import { ChainWalker, entryHash, type ChainedFields } from '../../../cloud/src/audit/audit-chain.ts';

const FIRST: ChainedFields = {
  prev_hash: null,
  account_id: 'acc_1',
  seq: 1,
  id: 'aud_1',
  ts: 1767607200000000,
  kind: 'site.created',
  actor: 'usr_1',
  target: 'site_1',
  details: '{"name":"Kühlraum"}',
};

describe('audit chain hashing', () => {
  it('hashes the JSON array of the fields in their fixed order, as an outside tool can recompute', () => {
    // printf '%s' '[null,"acc_1",1,"aud_1",1767607200000000,"site.created","usr_1","site_1","{\"name\":\"Kühlraum\"}"]' | sha256sum
    expect(entryHash(FIRST)).toBe('fbb09da2f8a618029e7e397617027a688d63987f148f908538ca92e43a60f48d');
  });

  it('changes with every field', () => {
    const variants: Partial<ChainedFields>[] = [
      { prev_hash: 'a'.repeat(64) },
      { account_id: 'acc_2' },
      { seq: 2 },
      { id: 'aud_2' },
      { ts: FIRST.ts + 1 },
      { kind: 'site.deleted' },
      { actor: 'usr_2' },
      { target: 'site_2' },
      { details: '{"name":"Kuhlraum"}' },
      // Moving text across a field boundary is a different entry too.
      { actor: 'usr_1site', target: '_1' },
    ];
    const hashes = new Set([entryHash(FIRST), ...variants.map((v) => entryHash({ ...FIRST, ...v }))]);
    expect(hashes.size).toBe(variants.length + 1);
  });

  it('walks links in order and names the first broken one', () => {
    const first = { ...FIRST, hash: entryHash(FIRST) };
    const secondFields = { ...FIRST, seq: 2, id: 'aud_2', prev_hash: first.hash };
    const second = { ...secondFields, hash: entryHash(secondFields) };
    const ok = new ChainWalker();
    expect([ok.next(first), ok.next(second)]).toEqual([null, null]);
    expect(ok.last).toEqual({ id: 'aud_2', hash: second.hash });

    const edited = new ChainWalker();
    expect([edited.next({ ...first, target: 'site_9' }), edited.checked]).toEqual(['hash_mismatch', 1]);
    const gap = new ChainWalker();
    expect([gap.next(second), gap.checked]).toEqual(['seq_gap', 1]);
    const relinked = new ChainWalker();
    relinked.next(first);
    expect(relinked.next({ ...second, prev_hash: 'b'.repeat(64) })).toBe('prev_hash_mismatch');
  });
});
