import { afterEach, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { ReadingQueue } from '../../gateway/src/buffer/reading-queue.ts';
import { createLogger } from '../../gateway/src/logger.ts';
import { tempDir } from '../helpers/databases.ts';

/** The gateway's buffer (gateway/src/buffer/reading-queue.ts) on a real SQLite file. */
describe('ReadingQueue.oldestTs', () => {
  let dir: string;
  let queue: ReadingQueue;

  afterEach(() => {
    queue.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('is the time of the reading waiting longest, not of a device info or state queued ahead of it', async () => {
    // Found by the outage-72h chaos scenario: devices first seen while the uplink is down queue
    // their info (stamped now) ahead of readings taken three days ago, and the status page said
    // the oldest reading waiting was 0 s old.
    dir = tempDir('sm-queue-');
    const log = createLogger('error', new Writable({ write: (_c, _e, done) => done() }));
    queue = new ReadingQueue({ file: path.join(dir, 'buffer.db'), capacity: 100, log });
    queue.open();
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
