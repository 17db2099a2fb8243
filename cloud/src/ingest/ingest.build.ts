import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import type { Database } from '../storage/database.ts';
import { IngestCore } from './ingest.core.ts';
import { PostgresIngestStore } from './ingest.store.postgres.ts';
import { SqliteIngestStore } from './ingest.store.sqlite.ts';
import type { Ingest, IngestObserver, IngestStore } from './ingest.types.ts';

/** The ingest hot path uses each database's own driver directly (the one dialect branch of ingest). */
function ingestStoreFor(database: Database, writers: number): IngestStore {
  if (database.sqlite) return new SqliteIngestStore(database.db, database.sqlite);
  if (database.pool) return new PostgresIngestStore(database.pool, writers);
  throw new Error('no database handle for ingest');
}

/** The one ingest core every way in submits to: its slice of the services. */
export function buildIngest(deps: {
  database: Database;
  clock: Clock;
  config: Config;
  log: Logger;
  metrics?: { ingest: IngestObserver };
}): {
  ingest: Ingest;
} {
  const { database, clock, config, log } = deps;
  return {
    ingest: new IngestCore({
      store: ingestStoreFor(database, config.ingestWriters),
      observer: deps.metrics?.ingest,
      clock,
      config,
      log: log.child({ module: 'ingest' }),
    }),
  };
}
