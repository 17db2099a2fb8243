import { afterEach, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import Database from 'better-sqlite3';
import { ReadingQueue } from '../../gateway/src/buffer/reading-queue.ts';
import { createLogger } from '../../gateway/src/logger.ts';
import { tempDir } from '../helpers/databases.ts';
import { until } from './helpers/gateway.ts';

/** The gateway's buffer (gateway/src/buffer/reading-queue.ts) on a real SQLite file. */
let dir: string;
let queue: ReadingQueue;

afterEach(() => {
  queue.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** An empty queue in a folder of its own (closed and removed after the test). */
function openQueue(): ReadingQueue {
  dir = tempDir('sm-queue-');
  const log = createLogger('error', new Writable({ write: (_c, _e, done) => done() }));
  queue = new ReadingQueue({ file: path.join(dir, 'buffer.db'), capacity: 100, log });
  queue.open();
  return queue;
}

describe('ReadingQueue.oldestTs', () => {
  it('is the time of the reading waiting longest, not of a device info or state queued ahead of it', async () => {
    // Found by the outage-72h chaos scenario: devices first seen while the uplink is down queue
    // their info (stamped now) ahead of readings taken three days ago, and the status page said
    // the oldest reading waiting was 0 s old.
    openQueue();
    const now = Date.now() * 1000;
    const threeDaysAgo = now - 72 * 3600 * 1_000_000;
    await Promise.all([
      queue.append({ device: 'd1', kind: 'info', ts: now, body: '{"model":"shelly-plus-ht"}' }),
      queue.append({ device: 'd1', kind: 'state', ts: now, body: '{"status":"online"}' }),
    ]);
    expect(queue.oldestTs()).toBeNull();
    await queue.append({
      device: 'd1',
      kind: 'reading',
      ts: threeDaysAgo,
      body: '[{"type":"temperature","value":20}]',
    });
    await queue.append({
      device: 'd1',
      kind: 'reading',
      ts: now,
      body: '[{"type":"temperature","value":21}]',
    });
    expect(queue.oldestTs()).toBe(threeDaysAgo);
    const [info, state, first] = queue.peek(0, 3);
    queue.ack([info!.id, state!.id, first!.id]);
    queue.flushDeletes();
    expect(queue.oldestTs()).toBe(now);
  });
});

describe('ReadingQueue acknowledgements', () => {
  async function filled(n: number): Promise<number[]> {
    openQueue();
    const at = Date.now() * 1000;
    await Promise.all(
      Array.from({ length: n }, (_, i) =>
        queue.append({
          device: 'd1',
          kind: 'reading',
          ts: at + i,
          body: `[{"type":"temperature","value":${i}}]`,
        }),
      ),
    );
    return queue.peek(0, n).map((r) => r.id);
  }

  it('leaves acknowledged rows out of a peek from the start before their delete is written', async () => {
    // Found by test/gateway/overload.test.ts: the uplink resumes from the oldest row in the turn of
    // the last acknowledgement of a busy pause, and sent rows acknowledged a moment before again.
    const ids = await filled(6);
    queue.ack([ids[0]!, ids[2]!, ids[3]!]);
    expect(queue.peek(0, 2).map((r) => r.id)).toEqual([ids[1], ids[4]]);
    expect(queue.peek(0, 10).map((r) => r.id)).toEqual([ids[1], ids[4], ids[5]]);
    expect(queue.depth).toBe(3);
    queue.flushDeletes();
    expect(queue.peek(0, 10).map((r) => r.id)).toEqual([ids[1], ids[4], ids[5]]);
  });

  it('counts a row acknowledged twice once, so the depth never goes below what waits', async () => {
    const ids = await filled(3);
    queue.ack([ids[0]!]);
    queue.ack([ids[0]!, ids[1]!]);
    expect(queue.depth).toBe(1);
    queue.flushDeletes();
    queue.ack([ids[2]!]);
    expect(queue.depth).toBe(0);
    expect(queue.oldestTs()).toBeNull();
  });

  it('knows the oldest reading waiting, not one acknowledged and still to be deleted', async () => {
    const ids = await filled(2);
    const [first, second] = queue.peek(0, 2);
    queue.ack([ids[0]!]);
    expect(queue.oldestTs()).toBe(second!.ts);
    expect(first!.ts).toBeLessThan(second!.ts);
  });
});

describe('ReadingQueue deletes', () => {
  it('keeps acknowledged rows out of the queue while their delete fails, and deletes them later', async () => {
    const q = openQueue();
    const at = Date.now() * 1000;
    await Promise.all(
      [0, 1, 2].map((i) =>
        q.append({
          device: 'd1',
          kind: 'reading',
          ts: at + i,
          body: `[{"type":"temperature","value":${i}}]`,
        }),
      ),
    );
    const [first, second, third] = q.peek(0, 3);
    const rows = () => {
      const reader = new Database(path.join(dir, 'buffer.db'), { readonly: true });
      try {
        return (reader.prepare('SELECT count(*) AS n FROM outbox').get() as { n: number }).n;
      } finally {
        reader.close();
      }
    };
    // Another connection holds the file's write lock: the batched delete fails.
    const other = new Database(path.join(dir, 'buffer.db'), { timeout: 0 });
    other.exec('BEGIN EXCLUSIVE');
    q.ack([first!.id, second!.id]);
    q.flushDeletes(); // waits for the lock as long as the connection's busy timeout, then fails
    expect(rows()).toBe(3);
    expect(q.depth).toBe(1);
    expect(q.peek(0, 10).map((r) => r.id)).toEqual([third!.id]);
    expect(q.oldestTs()).toBe(third!.ts);
    other.exec('ROLLBACK');
    other.close();
    // The delete is tried again a second later.
    const deadline = Date.now() + 5000;
    while (rows() !== 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(rows()).toBe(1);
    expect(q.depth).toBe(1);
  });
});

describe('ReadingQueue.reject', () => {
  it('keeps rows it could not move to dead_letters out of what is sent, and moves them once it can', async () => {
    // Runs inside the uplink's PUBACK callback: a throw there (a full disk) would end the gateway,
    // and the same refusal would meet the same failure after each restart.
    openQueue();
    const ts = Date.now() * 1000;
    for (const value of [1, 2])
      await queue.append({
        device: 'd1',
        kind: 'reading',
        ts: ts + value,
        body: `[{"type":"temperature","value":${value}}]`,
      });
    const [refused, kept] = queue.peek(0, 2);
    const other = new Database(path.join(dir, 'buffer.db'));
    const ddl = (
      other.prepare("SELECT sql FROM sqlite_master WHERE name = 'dead_letters'").get() as { sql: string }
    ).sql;
    other.exec('DROP TABLE dead_letters');
    expect(() => queue.reject([refused!.id], 0x99, 'payload format invalid')).not.toThrow();
    expect(queue.peek(0, 10).map((r) => r.id)).toEqual([kept!.id]);
    expect(queue.oldestTs()).toBe(kept!.ts);
    expect(queue.deadLetterCount).toBe(0);
    other.exec(ddl);
    other.close();
    await until(() => queue.deadLetterCount === 1, 'the retried move');
    expect(queue.depth).toBe(1);
    expect(queue.peek(0, 10).map((r) => r.id)).toEqual([kept!.id]);
  });

  it('sends a row again after a reopen when its move to dead_letters never succeeded', async () => {
    openQueue();
    await queue.append({
      device: 'd1',
      kind: 'reading',
      ts: Date.now() * 1000,
      body: '[{"type":"temperature","value":1}]',
    });
    const [refused] = queue.peek(0, 1);
    const other = new Database(path.join(dir, 'buffer.db'));
    const ddl = (
      other.prepare("SELECT sql FROM sqlite_master WHERE name = 'dead_letters'").get() as { sql: string }
    ).sql;
    other.exec('DROP TABLE dead_letters');
    queue.reject([refused!.id], 0x99, 'payload format invalid');
    queue.close();
    other.exec(ddl);
    other.close();
    // As after a restart: the row is sent again (and refused again, then moved).
    queue.open();
    expect(queue.peek(0, 10).map((r) => r.id)).toEqual([refused!.id]);
  });
});
