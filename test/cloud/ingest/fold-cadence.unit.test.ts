import { describe, expect, it } from '@jest/globals';
import { encodeJournal, FOLD_DELAY_MS, JournalFolder } from '../../../cloud/src/ingest/ingest.fold.ts';
import type { FoldTx, IngestStore } from '../../../cloud/src/ingest/ingest.types.ts';
import { eventually } from '../../helpers/eventually.ts';

/**
 * When the fold runs after commits: at once after a quiet spell (a live dashboard sees a reading as
 * it arrives), and under steady writes no sooner than FOLD_DELAY_MS after the last fold started, so
 * the groups of that time share one fold.
 */
describe('the fold after commits', () => {
  function folder() {
    const starts: number[] = [];
    const journal: Uint8Array[] = [];
    const tx: FoldTx = {
      takeJournal: (limit) => journal.splice(0, limit),
      upsertRollups: () => undefined,
      updateSensorLast: () => undefined,
    };
    const store = {
      fold: async (work: (t: FoldTx) => Promise<unknown>) => (starts.push(performance.now()), work(tx)),
    };
    const folded: number[][] = [];
    const f = new JournalFolder({
      store: store as unknown as IngestStore,
      log: { error: () => undefined },
      onFolded: (seqs) => folded.push(seqs),
    });
    /** A group commits a point on channel `seq` and tells the folder. */
    const commit = (seq: number) => {
      journal.push(encodeJournal(new Float64Array([seq, 1_763_800_000_000_000, 4.5])));
      f.written();
    };
    const nextFold = (n: number) => eventually(() => folded.length >= n, `fold ${n}`);
    return { f, starts, folded, commit, nextFold };
  }

  it('folds a commit after a quiet spell at once, and the commits of the next second together', async () => {
    const { f, starts, folded, commit, nextFold } = folder();
    const first = performance.now();
    commit(1);
    await nextFold(1);
    // Not held for the delay (a margin for a stalled machine).
    expect(starts[0]! - first).toBeLessThan(FOLD_DELAY_MS - 200);
    // Commits right after a fold wait for the rest of FOLD_DELAY_MS and are folded together.
    commit(2);
    commit(3);
    commit(4);
    await nextFold(2);
    expect(folded).toEqual([[1], [2, 3, 4]]);
    expect(starts[1]! - starts[0]!).toBeGreaterThanOrEqual(FOLD_DELAY_MS - 5);
    await f.stop();
  });
});
