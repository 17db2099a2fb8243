import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import { ChannelCache } from './channel-cache.ts';
import { JournalFolder } from './ingest.fold.ts';
import { newGroup, runIngestSteps, type IngestEnv, type IngestGroup } from './ingest.steps.ts';
import type {
  DeviceStateChange,
  Ingest,
  IngestItem,
  IngestObserver,
  IngestOutcome,
  IngestStore,
} from './ingest.types.ts';

export { DEVICE_STATE_JOB, toApiError } from './ingest.steps.ts';

const MAX_BATCH = 500;

/** Receives how many measurements a group wrote. */
export type AcceptedListener = (accepted: number) => void | Promise<void>;
export type DeviceStateListener = (changes: DeviceStateChange[]) => void | Promise<void>;
/** Receives the channel seqs whose last value a fold merged. */
export type FoldListener = (seqs: number[]) => void | Promise<void>;

interface Pending {
  item: IngestItem;
  /** When it was submitted (`performance.now()`): its wait, for admission control. */
  at: number;
  resolve: (outcome: IngestOutcome) => void;
  reject: (err: unknown) => void;
}

/**
 * The one ingest core every way in ends in (docs/architecture.md). Each group runs the steps of
 * `ingest.steps.ts` in one transaction: authenticate, authorise the device, count the rate limit,
 * validate the content, resolve or create the channels with the site vertical's defaults, write
 * with dedup on (channel, ts) and move the device state, answer. After commit the core hands the
 * new points to the fold and the rule engine.
 *
 * Requests are grouped: everything that arrives while the previous group is being written is
 * written in the next one, in one transaction. A durable commit (fsync) per group instead of per
 * request is what lets a 200 mean "committed" at tens of thousands of measurements per second.
 */
export class IngestCore implements Ingest {
  private queue: Pending[] = [];
  /** Items submitted and not yet answered: queued, or in a group being written. */
  private pending = 0;
  /** Groups being written now; at most `store.concurrency` (1 on SQLite: one writer anyway). */
  private writers = 0;
  private scheduled = false;
  /** The groups being written now (`catchUp` waits for them). */
  private readonly inFlight = new Set<Promise<void>>();
  private readonly channels = new ChannelCache();
  private readonly listeners: AcceptedListener[] = [];
  private readonly deviceListeners: DeviceStateListener[] = [];
  private readonly foldListeners: FoldListener[] = [];
  /** While shedding: since when (`performance.now()`) and how many requests so far; null otherwise. */
  private shedding: { since: number; count: number } | null = null;

  private readonly folder: JournalFolder;
  private readonly env: IngestEnv;

  constructor(
    private readonly deps: {
      store: IngestStore;
      /** Counters only: it runs once per item on the hot path. */
      observer?: IngestObserver;
      clock: Clock;
      config: Pick<Config, 'rateLimits' | 'rateLimitMode' | 'ingestAdmission' | 'retentionDays'>;
      log: Pick<Logger, 'warn' | 'error'>;
    },
  ) {
    this.folder = new JournalFolder({
      store: deps.store,
      log: deps.log,
      onFolded: (seqs) => this.emitTo(this.foldListeners, seqs),
    });
    this.env = { config: deps.config, log: deps.log, channels: this.channels };
  }

  /**
   * Resolves once the state derived from everything ingested so far (rollups, last values, the rule
   * engine's marker) is up to date: readers of that state call it first (ingest.fold.ts). "So far"
   * includes the groups being written at the call: on PostgreSQL several are, and they commit in
   * any order, so without waiting a rule pass would see a device's later reading before an earlier
   * one still in flight and re-derive the channel as late data (measured: a per-channel query or
   * two for nearly every channel at every pass).
   */
  async catchUp(): Promise<void> {
    if (this.inFlight.size > 0) await Promise.all(this.inFlight);
    return this.folder.catchUp();
  }

  /** After the last submit: folds what is left. */
  stop(): Promise<void> {
    return this.folder.stop();
  }

  /** Called with the number of measurements each group wrote, after it committed. A failing listener is logged. */
  onAccepted(listener: AcceptedListener): void {
    this.listeners.push(listener);
  }

  /**
   * Called after commit with the devices a group flipped online or offline (an uplink after
   * silence, a last-will `lwt` from the Shelly GET or the MQTT bridge). A failing listener is logged.
   */
  onDeviceState(listener: DeviceStateListener): void {
    this.deviceListeners.push(listener);
  }

  /** Called after each fold commits with the channel seqs whose last value it merged. A failing listener is logged. */
  onFolded(listener: FoldListener): void {
    this.foldListeners.push(listener);
  }

  /**
   * Admission control (docs/design/ingest.md, "Admission control"): true while this process holds
   * `maxPending` items not yet answered, or while the oldest item waiting for a group has waited
   * `maxWaitMs`. The ways in whose senders retry ask it before doing any work of their own and answer
   * 503 `overloaded` (PUBACK 0x97) meanwhile; `submit` itself never refuses.
   */
  overloaded(): boolean {
    const { maxPending, maxWaitMs } = this.deps.config.ingestAdmission;
    if (this.pending >= maxPending) return true;
    const oldest = this.queue[0];
    if (oldest !== undefined && performance.now() - oldest.at >= maxWaitMs) return true;
    if (this.shedding) {
      const { since, count } = this.shedding;
      this.shedding = null;
      this.deps.log.warn(
        { shed: count, ms: Math.round(performance.now() - since), pending: this.pending },
        'ingest admits again after shedding load',
      );
    }
    return false;
  }

  /**
   * Counts a request a way in refused because `overloaded()` said so (the metrics' rejections); the
   * log has one line when shedding starts and one when it ends, not one per request.
   */
  shed(item: Pick<IngestItem, 'way' | 'measurements'>): void {
    this.deps.observer?.rejected(item.way ?? 'http', 'overloaded', item.measurements.length);
    if (this.shedding) {
      this.shedding.count++;
      return;
    }
    this.shedding = { since: performance.now(), count: 1 };
    const oldest = this.queue[0];
    this.deps.log.warn(
      {
        pending: this.pending,
        oldest_wait_ms: oldest ? Math.round(performance.now() - oldest.at) : 0,
        ...this.deps.config.ingestAdmission,
      },
      'ingest overloaded: shedding load (503 overloaded, PUBACK 0x97)',
    );
  }

  submit(item: IngestItem): Promise<IngestOutcome> {
    this.pending++;
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject, at: performance.now() });
      if (!this.scheduled && this.writers < this.maxWriters) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private get maxWriters(): number {
    return this.deps.store.concurrency ?? 1;
  }

  /** Starts writers while there is work and room: what arrives during a group goes into the next. */
  private flush(): void {
    this.scheduled = false;
    while (this.writers < this.maxWriters && this.queue.length > 0) {
      this.writers++;
      void this.writer();
    }
  }

  private async writer(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const group = this.runBatch(this.queue.splice(0, MAX_BATCH)); // never rejects
        this.inFlight.add(group);
        await group;
        this.inFlight.delete(group);
      }
    } finally {
      this.writers--;
    }
  }

  private async runBatch(batch: Pending[]): Promise<void> {
    const items = batch.map((p) => p.item);
    // The group of the attempt that committed (a retry starts a fresh one).
    let group = null as IngestGroup | null;
    let outcomes: IngestOutcome[];
    const started = performance.now();
    try {
      outcomes = await this.withRetry(() =>
        this.deps.store.transaction((tx) => {
          group = newGroup(items, this.deps.clock.nowMicros());
          return runIngestSteps(group, tx, this.env);
        }),
      );
    } catch (err) {
      this.pending -= batch.length;
      for (const p of batch) {
        this.deps.observer?.rejected(p.item.way ?? 'http', 'db_unavailable', p.item.measurements.length);
        p.reject(err);
      }
      return;
    }
    this.pending -= batch.length;
    const observer = this.deps.observer;
    if (observer) {
      observer.committed(items.length, (performance.now() - started) / 1000);
      for (let i = 0; i < items.length; i++) {
        const o = outcomes[i]!;
        const way = items[i]!.way ?? 'http';
        if (o.ok) observer.accepted(way, o.accepted + o.deduplicated);
        else observer.rejected(way, o.error.code, items[i]!.measurements.length);
      }
    }
    const { learned, flipped } = group!;
    // Only now that the transaction committed may new channels enter the cache.
    for (const s of learned) this.channels.add(s);
    batch.forEach((p, i) => p.resolve(outcomes[i]!));
    const accepted = outcomes.reduce((n, o) => n + (o.ok ? o.accepted : 0), 0);
    if (accepted > 0) {
      this.folder.written();
      this.emitTo(this.listeners, accepted);
    }
    if (flipped.length > 0) this.emitTo(this.deviceListeners, flipped);
  }

  /** One retry when PostgreSQL chose this group as a deadlock or serialization victim. */
  private async withRetry<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code !== '40P01' && code !== '40001') throw err;
      this.deps.log.warn({ code }, 'ingest group retried after a deadlock');
      return work();
    }
  }

  private emitTo<T>(listeners: ((value: T) => void | Promise<void>)[], value: T): void {
    for (const listener of listeners) {
      try {
        const result = listener(value);
        if (result instanceof Promise) {
          result.catch((err: unknown) => this.deps.log.error({ err }, 'ingest listener failed'));
        }
      } catch (err) {
        this.deps.log.error({ err }, 'ingest listener failed');
      }
    }
  }
}
