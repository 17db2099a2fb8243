import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { createLogger } from '../../../cloud/src/logger.ts';
import { RuleEngine } from '../../../cloud/src/rules/rule-engine.ts';
import { RulesRepository } from '../../../cloud/src/rules/rules.repository.ts';
import { openDatabase, type Database, type Db } from '../../../cloud/src/storage/database.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';

const HOUR_MS = 3_600_000;

/**
 * Marked channels as a steady stream of ingest leaves them: `busyPasses` passes in a row find a
 * channel written since the previous pass, then nothing is left. Counts the passes (each asks once).
 */
class StreamedRepository extends RulesRepository {
  passes = 0;
  private firstPass!: () => void;
  readonly firstPassStarted = new Promise<void>((resolve) => (this.firstPass = resolve));

  constructor(private readonly busyPasses: number) {
    super();
  }

  override async dirtyChannels(_db: Db, _limit: number): Promise<number[]> {
    this.passes++;
    if (this.passes === 1) this.firstPass();
    return this.passes <= this.busyPasses ? [1] : [];
  }
}

/**
 * How many passes a drain makes. In the background (a kick, the tick) under a steady stream, one:
 * the pending kick brings the next within its delay, and passing back to back would evaluate the
 * same channels for a few new points each as fast as the database answers. `drain()` itself, which
 * tests rely on, goes on until nothing is left.
 */
describe.each(DATABASES)('rule engine drains on %s', (kind) => {
  let target: TestDatabase;
  let database: Database;
  let engine: RuleEngine | null = null;

  beforeEach(async () => {
    target = testDatabase(kind);
    database = await openDatabase(target.url, { schema: target.schema });
  });
  afterEach(async () => {
    await engine?.stop();
    engine = null;
    await database?.close();
    await target?.dispose();
  });

  function engineOver(repository: RulesRepository): RuleEngine {
    return new RuleEngine({
      database,
      clock: new ManualClock(Date.UTC(2026, 10, 1) * 1000),
      log: createLogger('silent'),
      repository,
      notifier: { notify: async () => undefined },
      tickMs: HOUR_MS,
      kickDelayMs: HOUR_MS,
    });
  }

  it('makes one pass in the background while a kick is pending, and drain() goes on until idle', async () => {
    const repository = new StreamedRepository(3);
    engine = engineOver(repository);
    engine.start(); // a background drain
    engine.kick(); // new data arrived: the next pass is due within the kick's delay
    await repository.firstPassStarted;
    // Queued behind the background drain; it runs until nothing is left.
    await engine.drain();
    // Background: pass 1. drain(): passes 2 and 3 find work, pass 4 nothing. A background drain
    // that looped on would have made passes 1 to 4 itself, and drain() a fifth.
    expect(repository.passes).toBe(4);
  });

  it('works off everything in the background when no kick is pending', async () => {
    const repository = new StreamedRepository(3);
    engine = engineOver(repository);
    engine.start();
    await repository.firstPassStarted;
    await engine.drain();
    // Background: passes 1 to 3 find work, pass 4 nothing; drain(): pass 5, nothing.
    expect(repository.passes).toBe(5);
  });
});
