import { MICROS_PER_DAY } from '../../../shared/time.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import type { MeasurementsRepository } from '../measurements/measurements.repository.ts';
import { bucketStart } from '../measurements/rollups.ts';
import type { Database, Db } from '../storage/database.ts';
import { dropMeasurementMonthsBefore } from '../storage/partitions.ts';

/**
 * Retention (docs/api/resources.md: data stays `RETENTION_DAYS`, default 730). The cutoff is rounded
 * down to a UTC day, so every rollup bucket lies wholly on one side of it and rollups stay exact:
 * data is kept at least `RETENTION_DAYS` and at most one day longer.
 */
export function retentionCutoff(config: Pick<Config, 'retentionDays'>, nowMicros: number): number {
  return bucketStart(nowMicros - config.retentionDays * MICROS_PER_DAY, MICROS_PER_DAY);
}

export interface RetentionResult {
  cutoff: number;
  groups: number;
  /** Rows deleted one by one (the month at the boundary; everything on SQLite). */
  deleted: number;
  /** Whole monthly partitions dropped (PostgreSQL). */
  droppedPartitions: string[];
}

/**
 * Removes measurements older than the retention cutoff, and their rollups. Whole months past the
 * cutoff go first where the storage keeps months apart (PostgreSQL's partitions, dropped by
 * `dropMeasurementMonthsBefore`); what is left before the cutoff is deleted one channel group per
 * transaction (each an index range scan on the group's key), so the job never holds a long lock and
 * ingest keeps flowing while it runs. A deleted device's channels become unreadable at the same
 * cutoff (`MeasurementsService.channel`).
 */
export class RetentionJob {
  constructor(
    private readonly deps: {
      db: Db;
      database: Database;
      clock: Clock;
      config: Config;
      log: Logger;
      measurements: MeasurementsRepository;
      /** Folds ingest's journal first: no rollup of old points may be merged after they are pruned. */
      catchUp?: () => Promise<void>;
    },
  ) {}

  async run(): Promise<RetentionResult> {
    const { db, clock, config, log, measurements } = this.deps;
    await this.deps.catchUp?.();
    const cutoff = retentionCutoff(config, clock.nowMicros());
    const droppedPartitions = await dropMeasurementMonthsBefore(this.deps.database, cutoff, log);
    let deleted = 0;
    const groups = await measurements.groups(db);
    for (const grp of groups) {
      deleted += await db.transaction().execute((trx) => measurements.deleteBefore(trx, grp, cutoff));
    }
    if (deleted > 0)
      log.info({ cutoff, groups: groups.length, deleted }, 'retention removed old measurements');
    return { cutoff, groups: groups.length, deleted, droppedPartitions };
  }
}
