import type { Logger } from '../logger.ts';
import { Throttle } from '../throttle.ts';
import { rollupDeltasOf, type RollupDelta } from '../measurements/rollups.ts';
import type { IngestStore, SensorLastRow } from './ingest.types.ts';

/**
 * The fold: state derived from the measurements, kept off ingest's hot path.
 *
 * An ingest group writes its raw rows and, in the same transaction, one `ingest_journal` row holding
 * the points it wrote ((channel seq, ts, value) triplets of float64). Folding takes journal
 * rows and, in one transaction, merges them into what is derived from them: the hourly and daily
 * rollups (`measurement_rollups`), each channel's last value, and the rule engine's marker
 * (`sensors.eval_from`, `eval_gen`). Everything is a commutative merge (counts add, extremes widen,
 * the newest ts wins), so folds may run in any order and in any process, and a crash between ingest
 * and fold loses nothing: the journal is durable with the data.
 *
 * Folding a second's worth of groups at once is the point: a channel written by 20 groups costs one
 * rollup upsert per level and one last-value update instead of 20 (docs/design/ingest.md).
 *
 * Readers of derived state call `catchUp()` first: it resolves once everything committed before
 * the call is folded, so an answer never lags the data (a 200 from ingest, then a read, sees it).
 */
export const JOURNAL_TRIPLET = 3;
/** Journal rows per fold transaction: bounds the memory of one fold however long the backlog. */
const TAKE_LIMIT = 256;
/**
 * Folds after commits start at most this often, when no reader asks sooner: a commit after a quiet
 * spell is folded at once (a live dashboard sees a reading as it arrives), and under steady load the
 * groups of up to a second share one fold.
 */
export const FOLD_DELAY_MS = 1000;

/**
 * The journal payload of written points: (seq, ts, value) triplets as big-endian float64, the byte
 * order PostgreSQL's `float8send` writes (its ingest statement builds the payload itself).
 */
export function encodeJournal(points: Float64Array): Buffer {
  return Buffer.from(new Uint8Array(points.buffer, points.byteOffset, points.byteLength)).swap64();
}

export function decodeJournal(payload: Uint8Array): Float64Array {
  // A copy (swapped in place): the driver's buffer need not be 8-byte aligned.
  const copy = Buffer.alloc(payload.byteLength);
  copy.set(payload);
  // Rows written by earlier builds are little-endian, told apart by their first byte: a channel
  // seq (an integer from 1 to 2^44) starts with its exponent (0x3F to 0x42) big-endian, and with
  // its lowest mantissa byte (always 0) little-endian.
  if (copy.length > 0 && copy[0] !== 0) copy.swap64();
  return new Float64Array(copy.buffer, copy.byteOffset, payload.byteLength / 8);
}

/** What a set of written points changes: rollup deltas (key order) and each channel's newest/oldest point. */
export function foldPoints(batches: Float64Array[]): { deltas: RollupDelta[]; lasts: SensorLastRow[] } {
  const lasts = new Map<number, SensorLastRow>();
  for (const points of batches) {
    for (let i = 0; i + 2 < points.length; i += JOURNAL_TRIPLET) {
      const seq = points[i]!;
      const ts = points[i + 1]!;
      const found = lasts.get(seq);
      if (!found) {
        lasts.set(seq, { sensorSeq: seq, ts, value: points[i + 2]!, minTs: ts });
        continue;
      }
      if (ts >= found.ts) {
        found.ts = ts;
        found.value = points[i + 2]!;
      }
      if (ts < found.minTs) found.minTs = ts;
    }
  }
  return {
    deltas: rollupDeltasOf(batches),
    lasts: [...lasts.values()].sort((a, b) => a.sensorSeq - b.sensorSeq),
  };
}

/**
 * Runs folds for one process: after groups commit (at once after a quiet spell, otherwise
 * FOLD_DELAY_MS after the last fold started), and whenever a reader calls `catchUp()`. One fold runs
 * at a time; callers that arrive while one runs share the next.
 */
export class JournalFolder {
  private running: Promise<void> | null = null;
  private queued: Promise<void> | null = null;
  private readonly afterCommits = new Throttle(FOLD_DELAY_MS, () =>
    this.catchUp().catch((err: unknown) => this.deps.log.error({ err }, 'ingest fold failed')),
  );
  private stopped = false;

  constructor(
    private readonly deps: {
      store: IngestStore;
      log: Pick<Logger, 'error'>;
      /** After a fold commits: the channel seqs whose last value it merged (the live updates). */
      onFolded?: (seqs: number[]) => void;
    },
  ) {}

  /** A group committed journal rows: fold them at once after a quiet spell, otherwise soon. */
  written(): void {
    if (!this.stopped) this.afterCommits.request();
  }

  /** Resolves once every journal row committed before this call has been folded. */
  catchUp(): Promise<void> {
    if (!this.running) return (this.running = this.runLoop());
    // The running fold may have read the journal before the caller's data committed: queue one more.
    this.queued ??= this.running.then(
      () => this.next(),
      () => this.next(),
    );
    return this.queued;
  }

  private next(): Promise<void> {
    this.queued = null;
    return (this.running = this.runLoop());
  }

  private async runLoop(): Promise<void> {
    this.afterCommits.started();
    try {
      while ((await this.foldOnce()) === TAKE_LIMIT);
    } finally {
      this.running = null;
    }
  }

  /** One transaction: takes up to TAKE_LIMIT journal rows and merges them; answers how many it took. */
  private async foldOnce(): Promise<number> {
    let folded: number[] = [];
    const taken = await this.deps.store.fold(async (tx) => {
      const payloads = await tx.takeJournal(TAKE_LIMIT);
      if (payloads.length === 0) return 0;
      const { deltas, lasts } = foldPoints(payloads.map(decodeJournal));
      if (deltas.length) await tx.upsertRollups(deltas);
      if (lasts.length) await tx.updateSensorLast(lasts);
      folded = lasts.map((l) => l.sensorSeq);
      return payloads.length;
    });
    if (folded.length > 0) this.deps.onFolded?.(folded);
    return taken;
  }

  /** Stops the timer and folds what is left, so a clean shutdown leaves an empty journal. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.afterCommits.cancel();
    await this.catchUp();
  }
}
