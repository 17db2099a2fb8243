import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { RateLimiter } from '../../../cloud/src/limits/rate-limiter.ts';
import { openDatabase, type Database } from '../../../cloud/src/storage/database.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { ROOT } from '../../helpers/process.ts';

/**
 * The batched rate-limit counters (docs/design/rate-limits.md): exact answers in one process, a
 * bounded overshoot across processes, counted hits written by the flush, the timer and stop().
 * Each "process" is a limiter on a connection of its own to one database.
 */
const T0 = Date.UTC(2026, 0, 5, 10, 0, 0) * 1000; // a minute boundary
const WINDOW_END = T0 / 1_000_000 + 60;
const NEVER = 3_600_000; // a sync interval no test waits for

describe.each(DATABASES)('the rate limiter on %s', (kind) => {
  let target: TestDatabase;
  const opened: Database[] = [];
  const limiters: RateLimiter[] = [];

  beforeEach(() => {
    target = testDatabase(kind);
  });
  afterEach(async () => {
    for (const limiter of limiters.splice(0)) await limiter.stop();
    for (const database of opened.splice(0)) await database.close();
    await target.dispose();
  });

  /** A limiter as one cloud process has it: its own connection to the shared database. */
  async function replica(clock: ManualClock, syncMs = NEVER): Promise<RateLimiter> {
    const database = await openDatabase(target.url, { schema: target.schema });
    opened.push(database);
    const limiter = new RateLimiter({ db: database.db, clock, syncMs });
    limiters.push(limiter);
    return limiter;
  }

  async function rowCount(bucket: string): Promise<number | undefined> {
    const row = await opened[0]!.db
      .selectFrom('rate_limit_counters')
      .select('count')
      .where('bucket', '=', bucket)
      .where('window_start', '=', T0 / 1_000_000)
      .executeTakeFirst();
    return row?.count;
  }

  it('answers every hit exactly in one process while it writes only the first until the flush', async () => {
    const clock = new ManualClock(T0 + 10_000_000);
    const limiter = await replica(clock);
    for (let i = 1; i <= 10; i++) {
      expect(await limiter.hit('read:a', 1000)).toEqual({
        allowed: true,
        limit: 1000,
        remaining: 1000 - i,
        resetAt: WINDOW_END,
        retryAfterSeconds: 50,
      });
    }
    expect(await rowCount('read:a')).toBe(1);
    await limiter.flush();
    expect(await rowCount('read:a')).toBe(10);
  });

  it('refuses exactly at the limit in one process, and writes hits near it at once', async () => {
    const clock = new ManualClock(T0);
    const limiter = await replica(clock);
    const remaining: number[] = [];
    for (let i = 0; i < 100; i++) {
      const result = await limiter.hit('mgmt:a', 100);
      expect(result.allowed).toBe(true);
      remaining.push(result.remaining);
    }
    expect(remaining).toEqual(Array.from({ length: 100 }, (_, i) => 99 - i));
    // The last five (the slack of a limit of 100) were each written before they were answered.
    expect(await rowCount('mgmt:a')).toBe(100);
    clock.advanceMs(15_000);
    expect(await limiter.hit('mgmt:a', 100)).toEqual({
      allowed: false,
      limit: 100,
      remaining: 0,
      resetAt: WINDOW_END,
      retryAfterSeconds: 45,
    });
  });

  it('lets two processes together allow at most the limit plus one slack (5 of 100)', async () => {
    const clock = new ManualClock(T0);
    const one = await replica(clock);
    const two = await replica(clock);
    const results = await Promise.all(
      Array.from({ length: 300 }, (_, i) => (i % 2 ? one : two).hit('mgmt:shared', 100)),
    );
    const allowed = results.filter((r) => r.allowed).length;
    expect(allowed).toBeGreaterThanOrEqual(100);
    expect(allowed).toBeLessThanOrEqual(105);
    await Promise.all([one.flush(), two.flush()]);
    expect(await one.hit('mgmt:shared', 100)).toMatchObject({ allowed: false, remaining: 0 });
    expect(await two.hit('mgmt:shared', 100)).toMatchObject({ allowed: false, remaining: 0 });
  });

  it('keeps three processes taking turns within the limit plus two slacks', async () => {
    const clock = new ManualClock(T0);
    const all = [await replica(clock), await replica(clock), await replica(clock)];
    let allowed = 0;
    // Rounds of concurrent hits, one from each, so each sees the others' flushed counts late.
    for (let round = 0; round < 150; round++) {
      const results = await Promise.all(all.map((limiter) => limiter.hit('mgmt:three', 200)));
      allowed += results.filter((r) => r.allowed).length;
    }
    expect(allowed).toBeGreaterThanOrEqual(200);
    expect(allowed).toBeLessThanOrEqual(200 + 2 * 10);
  });

  it('reads the row with its first hit of a window, so a new process starts from what others wrote', async () => {
    const clock = new ManualClock(T0);
    const first = await replica(clock);
    for (let i = 0; i < 30; i++) await first.hit('mgmt:a', 600);
    await first.stop();
    expect(await rowCount('mgmt:a')).toBe(30);
    const second = await replica(clock);
    expect(await second.hit('mgmt:a', 600)).toMatchObject({ allowed: true, remaining: 569 });
  });

  it('writes counted hits within syncMs of the first, by a timer of its own', async () => {
    const limiter = await replica(new ManualClock(T0), 20);
    for (let i = 0; i < 5; i++) await limiter.hit('read:a', 1000);
    expect(await rowCount('read:a')).toBe(1);
    await eventually(async () => (await rowCount('read:a')) === 5, 'the timer to write the counted hits');
  });

  it("writes a window's counted hits to that window's row after the clock moves on", async () => {
    const clock = new ManualClock(T0);
    const limiter = await replica(clock);
    for (let i = 0; i < 5; i++) await limiter.hit('read:a', 1000);
    clock.advanceMs(60_000);
    expect(await limiter.hit('read:a', 1000)).toMatchObject({ remaining: 999, resetAt: WINDOW_END + 60 });
    await limiter.flush();
    expect(await rowCount('read:a')).toBe(5);
  });

  it('loses at most the unwritten hits when a process dies, and never more than the slack', async () => {
    const clock = new ManualClock(T0);
    const dying = await replica(clock);
    // Slack is floor(600 / 20) = 30: the first hit is written at once, the next 14 wait in memory
    // (half the slack, 15 waiting, would start a write of its own, whose timing the test cannot see).
    for (let i = 0; i < 15; i++) await dying.hit('mgmt:a', 600);
    // No stop(): what it wrote is what survives, and the 14 it kept are lost, fewer than the slack.
    const written = (await rowCount('mgmt:a'))!;
    expect(written).toBe(1);
    const next = await replica(clock);
    expect(await next.hit('mgmt:a', 600)).toMatchObject({ remaining: 600 - written - 1 });
    limiters.splice(limiters.indexOf(dying), 1);
  });

  it('lets a process exit while counted hits wait for their timer (the timer holds nothing open)', async () => {
    const script = `
      const { openDatabase } = await import(${JSON.stringify(path.join(ROOT, 'cloud/src/storage/database.ts'))});
      const { RateLimiter } = await import(${JSON.stringify(path.join(ROOT, 'cloud/src/limits/rate-limiter.ts'))});
      const { SystemClock } = await import(${JSON.stringify(path.join(ROOT, 'cloud/src/clock.ts'))});
      const database = await openDatabase(process.env.DB_URL, { schema: process.env.DB_SCHEMA || undefined });
      const limiter = new RateLimiter({ db: database.db, clock: new SystemClock(), syncMs: 600000 });
      for (let i = 0; i < 3; i++) await limiter.hit('read:a', 1000);
      await database.close();
      process.stdout.write('counted');`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, DB_URL: target.url, DB_SCHEMA: target.schema ?? '' },
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    // A referenced timer would keep it alive for ten minutes, past the test's timeout.
    const code = await new Promise((resolve) => child.on('exit', resolve));
    expect([code, out]).toEqual([0, 'counted']);
  });

  it('writes every hit at once with syncMs 0, as the counters always did', async () => {
    const limiter = await replica(new ManualClock(T0), 0);
    for (let i = 0; i < 10; i++) await limiter.hit('read:a', 1000);
    expect(await rowCount('read:a')).toBe(10);
  });
});
