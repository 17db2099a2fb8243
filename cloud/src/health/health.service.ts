import { DatabaseUnavailable, NotReady } from '../errors.ts';
import { pendingMigrations, type Db } from '../storage/database.ts';

export interface HealthDeps {
  db: Db;
}

/**
 * What a load balancer asks a replica: is the process alive (`/healthz`), and should it get
 * requests (`/readyz`: the process has started all it listens with (the MQTT bridge included, which
 * the balancer routes by the same check), the database answers, the schema is current, and the
 * process is not draining for a stop).
 */
export class Health {
  private drainingSince: number | null = null;
  private started = false;

  /** Everything is listening: `/readyz` may answer 200 from now on. */
  markStarted(): void {
    this.started = true;
  }

  constructor(private readonly deps: HealthDeps) {}

  /** From now on `/readyz` answers 503, so the balancer takes this replica out before it stops. */
  startDraining(): void {
    this.drainingSince ??= Date.now();
  }

  get draining(): boolean {
    return this.drainingSince !== null;
  }

  /** Resolves when ready; throws the 503 to answer otherwise. */
  async ready(): Promise<void> {
    if (this.draining) throw new NotReady('the process is stopping');
    if (!this.started) throw new NotReady('the process is starting');
    let pending: string[];
    try {
      pending = await pendingMigrations(this.deps.db);
    } catch (err) {
      // Logged with the request's answer, in the database outage log (storage/outage-log.ts).
      throw new DatabaseUnavailable(err);
    }
    if (pending.length > 0) throw new NotReady(`migrations not applied: ${pending.join(', ')}`);
  }
}
