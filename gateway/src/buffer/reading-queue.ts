import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { Logger } from '../logger.ts';
import { ReadingRefused } from '../reading.ts';

/** What a queued row is: a reading, a device's last-will/online state, or its info. */
export type QueuedKind = 'reading' | 'state' | 'info';
const KIND_CODE: Record<QueuedKind, number> = { reading: 0, state: 1, info: 2 };
const KIND_NAME: QueuedKind[] = ['reading', 'state', 'info'];

export interface QueueEntry {
  device: string;
  kind: QueuedKind;
  /** Microseconds since the epoch: when the reading was taken (or the state changed). */
  ts: number;
  /** For readings the JSON array of wire measurements; otherwise the JSON payload itself. */
  body: string;
}

export interface QueuedMessage extends QueueEntry {
  id: number;
}

interface PendingAppend {
  entry: QueueEntry;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export interface ReadingQueueOptions {
  /** The SQLite file; its directory is created when missing. */
  file: string;
  /** Rows the queue holds at most; beyond it new readings are refused (never old ones dropped). */
  capacity: number;
  log: Logger;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS outbox (
  -- AUTOINCREMENT: ids never go back (a plain rowid restarts at 1 once the table is empty, and the
  -- uplink's cursor, which only moves forward, would then skip every new row).
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  device TEXT NOT NULL,
  kind INTEGER NOT NULL,
  ts INTEGER NOT NULL,
  body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS dead_letters (
  id INTEGER PRIMARY KEY,
  device TEXT NOT NULL,
  kind INTEGER NOT NULL,
  ts INTEGER NOT NULL,
  body TEXT NOT NULL,
  reason_code INTEGER NOT NULL,
  reason TEXT NOT NULL,
  rejected_at INTEGER NOT NULL
);
-- What collectors learn about their devices and must know after a restart (CollectorMemory).
CREATE TABLE IF NOT EXISTS collector_memory (
  collector TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (collector, key)
) WITHOUT ROWID;
`;

/** How long a failed batch of deletes waits before it is tried again. */
const DELETE_RETRY_MS = 1000;

/**
 * The gateway's durable outbox (docs/design/gateway.md): an append-only SQLite table in
 * WAL mode with synchronous=FULL, so a committed row survives a power cut. A reading enters it before
 * its source is told "accepted" and leaves only after the cloud's PUBACK.
 *
 * Appends made in the same turn of the event loop share one transaction (one fsync), which is what
 * lets a burst of devices be acknowledged quickly on an SD card. Deletes after PUBACK are batched the
 * same way; losing one to a power cut only means the row is sent again, which the cloud's dedup on
 * (device, ts, channel) turns into a no-op.
 *
 * Policy when full: new readings are refused (the source hears "not accepted" and keeps or retries
 * them); readings already accepted are never dropped to make room.
 */
export class ReadingQueue extends EventEmitter<{ appended: [] }> {
  private db: Database.Database | null = null;
  private statements: {
    insert: Database.Statement<[string, number, number, string]>;
    peek: Database.Statement<[number, number]>;
    remove: Database.Statement<[number]>;
    oldest: Database.Statement<[number]>;
    deadLetter: Database.Statement<[number, string, number, number]>;
    deadCount: Database.Statement<[]>;
    recall: Database.Statement<[string]>;
    remember: Database.Statement<[string, string, string]>;
  } | null = null;
  private pendingAppends: PendingAppend[] = [];
  /** Rows the cloud acknowledged whose delete waits for the next batch: no longer in the queue. */
  private pendingDeletes = new Set<number>();
  /** Rows the cloud refused for good whose move to `dead_letters` failed: retried, never sent again. */
  private pendingRejects = new Map<number, { reasonCode: number; reason: string }>();
  private rejectRetry: NodeJS.Timeout | null = null;
  private appendScheduled = false;
  private deleteScheduled = false;
  private count = 0;
  private deadLetters = 0;

  constructor(private readonly options: ReadingQueueOptions) {
    super();
  }

  get capacity(): number {
    return this.options.capacity;
  }

  /** Rows waiting for the cloud's PUBACK (acknowledged rows whose delete is pending are not counted). */
  get depth(): number {
    return this.count;
  }

  get deadLetterCount(): number {
    return this.deadLetters;
  }

  open(): void {
    if (this.db) return;
    fs.mkdirSync(path.dirname(this.options.file), { recursive: true });
    const db = new Database(this.options.file);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('cache_size = -4000');
    db.exec(SCHEMA);
    this.statements = {
      insert: db.prepare('INSERT INTO outbox (device, kind, ts, body) VALUES (?, ?, ?, ?)'),
      peek: db.prepare('SELECT id, device, kind, ts, body FROM outbox WHERE id > ? ORDER BY id LIMIT ?'),
      remove: db.prepare('DELETE FROM outbox WHERE id = ?'),
      oldest: db.prepare('SELECT id, ts FROM outbox WHERE kind = 0 ORDER BY id LIMIT ?'),
      deadLetter: db.prepare(
        `INSERT INTO dead_letters (device, kind, ts, body, reason_code, reason, rejected_at)
         SELECT device, kind, ts, body, ?, ?, ? FROM outbox WHERE id = ?`,
      ),
      deadCount: db.prepare('SELECT count(*) AS n FROM dead_letters'),
      recall: db.prepare('SELECT key, value FROM collector_memory WHERE collector = ?'),
      remember: db.prepare(
        `INSERT INTO collector_memory (collector, key, value) VALUES (?, ?, ?)
         ON CONFLICT (collector, key) DO UPDATE SET value = excluded.value`,
      ),
    };
    this.db = db;
    this.count = (db.prepare('SELECT count(*) AS n FROM outbox').get() as { n: number }).n;
    this.deadLetters = (this.statements.deadCount.get() as { n: number }).n;
    this.options.log.info(
      { file: this.options.file, depth: this.count, deadLetters: this.deadLetters },
      'buffer opened',
    );
  }

  /**
   * Queues one entry durably. Resolves once the transaction holding it committed; rejects with
   * ReadingRefused('buffer_full') when the queue is at capacity, or ('buffer_error') when SQLite
   * could not write (disk full, card gone).
   */
  append(entry: QueueEntry): Promise<void> {
    if (!this.db) return Promise.reject(new ReadingRefused('buffer_error', 'the buffer is not open'));
    return new Promise<void>((resolve, reject) => {
      this.pendingAppends.push({ entry, resolve, reject });
      if (!this.appendScheduled) {
        this.appendScheduled = true;
        setImmediate(() => this.flushAppends());
      }
    });
  }

  /** Commits every append of this turn in one transaction (one fsync). */
  flushAppends(): void {
    this.appendScheduled = false;
    const batch = this.pendingAppends;
    this.pendingAppends = [];
    if (batch.length === 0 || !this.db || !this.statements) {
      for (const p of batch) p.reject(new ReadingRefused('buffer_error', 'the buffer is closed'));
      return;
    }
    const room = Math.max(0, this.options.capacity - this.count);
    const admitted = batch.slice(0, room);
    for (const p of batch.slice(room)) {
      p.reject(
        new ReadingRefused('buffer_full', `the buffer holds its capacity of ${this.options.capacity}`),
      );
    }
    if (admitted.length === 0) return;
    const insert = this.statements.insert;
    try {
      this.db.transaction(() => {
        for (const { entry } of admitted)
          insert.run(entry.device, KIND_CODE[entry.kind], entry.ts, entry.body);
      })();
    } catch (err) {
      this.options.log.error({ err, rows: admitted.length }, 'buffer write failed');
      for (const p of admitted)
        p.reject(new ReadingRefused('buffer_error', `buffer write failed: ${String(err)}`));
      return;
    }
    this.count += admitted.length;
    for (const p of admitted) p.resolve();
    this.emit('appended');
  }

  /**
   * Up to `limit` rows with an id above `afterId`, oldest first. Rows already acknowledged are left
   * out though their delete is still pending: an uplink that starts again from the oldest row in the
   * same turn as an acknowledgement must not send that row a second time.
   */
  peek(afterId: number, limit: number): QueuedMessage[] {
    if (!this.statements) return [];
    const out: QueuedMessage[] = [];
    let after = afterId;
    while (out.length < limit) {
      const want = limit - out.length;
      const rows = this.statements.peek.all(after, want) as {
        id: number;
        device: string;
        kind: number;
        ts: number;
        body: string;
      }[];
      for (const r of rows) {
        if (this.pendingDeletes.has(r.id) || this.pendingRejects.has(r.id)) continue;
        out.push({ id: r.id, device: r.device, kind: KIND_NAME[r.kind]!, ts: r.ts, body: r.body });
      }
      if (rows.length < want) break;
      after = rows[rows.length - 1]!.id;
    }
    return out;
  }

  /** The cloud PUBACKed these rows: they leave the queue (deleted in the next batch). Idempotent. */
  ack(ids: readonly number[]): void {
    for (const id of ids) {
      if (this.pendingDeletes.has(id)) continue;
      this.pendingDeletes.add(id);
      this.count--;
    }
    // Past 2,000 the batch is written at once, unless a write is already planned (a failed one
    // waits for its retry: trying again on every acknowledgement would redo it ever larger).
    if (this.pendingDeletes.size >= 2000 && !this.deleteScheduled) this.flushDeletes();
    else if (!this.deleteScheduled) {
      this.deleteScheduled = true;
      setImmediate(() => this.flushDeletes());
    }
  }

  flushDeletes(): void {
    this.deleteScheduled = false;
    const ids = [...this.pendingDeletes];
    this.pendingDeletes.clear();
    if (ids.length === 0 || !this.db || !this.statements) return;
    const remove = this.statements.remove;
    try {
      this.db.transaction(() => {
        for (const id of ids) remove.run(id);
      })();
    } catch (err) {
      // The cloud has these rows: they stay out of the queue and their delete is tried again in a
      // second (a restart meanwhile sends them again, which the cloud deduplicates).
      for (const id of ids) this.pendingDeletes.add(id);
      this.options.log.error({ err, rows: ids.length }, 'buffer delete failed: trying again in a second');
      if (!this.deleteScheduled) {
        this.deleteScheduled = true;
        setTimeout(() => this.flushDeletes(), DELETE_RETRY_MS).unref();
      }
    }
  }

  /**
   * The cloud refused these rows for good (PUBACK 0x99 payload format invalid, 0x83 rule failure):
   * they move to the dead-letter table with the reason, kept for an operator, never retried.
   */
  reject(ids: readonly number[], reasonCode: number, reason: string): void {
    for (const id of ids) this.pendingRejects.set(id, { reasonCode, reason });
    this.flushRejects();
  }

  /**
   * Moves the refused rows to `dead_letters`. A failed write (a full disk) keeps them out of what
   * is sent and tries again in a second: it runs inside the uplink's PUBACK callback, where a throw
   * would end the process, and the same refusal would meet the same failure after each restart.
   */
  private flushRejects(): void {
    if (this.rejectRetry) clearTimeout(this.rejectRetry);
    this.rejectRetry = null;
    if (this.pendingRejects.size === 0 || !this.db || !this.statements) return;
    const { deadLetter, remove } = this.statements;
    const rejects = [...this.pendingRejects];
    const at = Date.now() * 1000;
    try {
      this.db.transaction(() => {
        for (const [id, r] of rejects) {
          deadLetter.run(r.reasonCode, r.reason, at, id);
          remove.run(id);
        }
      })();
    } catch (err) {
      this.options.log.error(
        { err, rows: rejects.length },
        'moving refused rows to dead_letters failed: trying again in a second',
      );
      this.rejectRetry = setTimeout(() => this.flushRejects(), DELETE_RETRY_MS);
      this.rejectRetry.unref();
      return;
    }
    this.pendingRejects.clear();
    this.count -= rejects.length;
    this.deadLetters += rejects.length;
  }

  /**
   * When the reading that has waited longest (the next to leave) was taken, microseconds; null when
   * no reading waits. States and info are not readings: their time is when the gateway queued them,
   * which says nothing of a backlog of readings that carry their devices' own, older, times.
   */
  oldestTs(): number | null {
    if (!this.statements || this.count === 0) return null;
    // Readings first-in by id; the few states and info rows ahead of them are skipped, and so are
    // the acknowledged rows whose delete is pending (no write for a status read).
    const skipped = this.pendingDeletes.size + this.pendingRejects.size;
    const rows = this.statements.oldest.all(skipped + 1) as { id: number; ts: number }[];
    return rows.find((r) => !this.pendingDeletes.has(r.id) && !this.pendingRejects.has(r.id))?.ts ?? null;
  }

  /** What `collector` remembered (CollectorMemory); empty while the buffer is closed. */
  recall(collector: string): Map<string, string> {
    const rows = (this.statements?.recall.all(collector) ?? []) as { key: string; value: string }[];
    return new Map(rows.map((r) => [r.key, r.value]));
  }

  /** Keeps one fact of `collector`'s in its own committed write; false when it could not be written. */
  remember(collector: string, key: string, value: string): boolean {
    if (!this.statements) return false;
    try {
      this.statements.remember.run(collector, key, value);
      return true;
    } catch (err) {
      this.options.log.error({ err, collector, key }, 'could not write what the collector learned');
      return false;
    }
  }

  /** Writes what is pending, then closes the database. Safe to call twice. */
  close(): void {
    if (!this.db) return;
    this.flushAppends();
    this.flushDeletes();
    this.flushRejects();
    if (this.rejectRetry) clearTimeout(this.rejectRetry);
    this.rejectRetry = null;
    // Rows still to move are sent again after a reopen, and refused again, as after a restart.
    this.pendingRejects.clear();
    this.db.close();
    this.db = null;
    this.statements = null;
  }
}
