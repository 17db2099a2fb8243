import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { notFound, Unprocessable } from '../errors.ts';
import type { UserPrincipal } from '../http/context.ts';
import type { Db } from '../storage/database.ts';
import type { SensorRow, SensorsRepository } from './sensors.repository.ts';
import type { Logger } from '../logger.ts';

/** The longest grace a sensor may have without a raised limit (docs/api.md). */
export const MAX_GRACE_MIN = 360;

export interface RulePatch {
  ok_min?: number | undefined;
  ok_max?: number | undefined;
  grace_min?: number | undefined;
  rule_enabled?: boolean | undefined;
  no_data_min?: number | undefined;
}

export type RuleFields = Pick<SensorRow, 'ok_min' | 'ok_max' | 'grace_min' | 'rule_enabled' | 'no_data_min'>;

/**
 * Told of every rule change (the rule engine): inside the change's transaction, so the rule history
 * exists exactly when the change does, and after commit, to re-evaluate the channel.
 */
export interface RuleChangeListener {
  ruleChanged(db: Db, sensor: SensorRow, before: RuleFields, after: RuleFields, at: number): Promise<void>;
  ruleCommitted(): void;
}

function ruleOf(s: SensorRow): RuleFields {
  return {
    ok_min: s.ok_min,
    ok_max: s.ok_max,
    grace_min: s.grace_min,
    rule_enabled: s.rule_enabled,
    no_data_min: s.no_data_min,
  };
}

export function ruleView(r: RuleFields): Record<string, unknown> {
  return { ...r, rule_enabled: r.rule_enabled === 1 };
}

/** A sensor's simple rule: one operating range, a grace period, a no-data window. */
export class SensorsService {
  private readonly ruleListeners: ((sensor: SensorRow) => void)[] = [];

  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      sensors: SensorsRepository;
      audit: AuditRepository;
      ruleChanges?: RuleChangeListener;
      /**
       * Brings the channels' last values and states up to date with everything answered before the
       * call (the rule engine's `settle`), so that a read reflects every write.
       */
      settle?: (seqs: readonly number[]) => Promise<void>;
      /** For a failing rule listener: the change committed, so it is logged, not answered 500. */
      log?: Pick<Logger, 'error'>;
    },
  ) {}

  /** A device's sensors, their last values and states up to date. */
  async listForDevice(deviceId: string): Promise<SensorRow[]> {
    const { db, sensors, settle } = this.deps;
    if (settle) await settle(await sensors.seqsOfDevice(db, deviceId));
    return sensors.listForDevice(db, deviceId);
  }

  /** The worst open alert-rule severity of each sensor that has one (docs/api/alert-rules.md). */
  async alertSeverities(seqs: readonly number[]): Promise<Map<number, 'warning' | 'critical'>> {
    const out = new Map<number, 'warning' | 'critical'>();
    if (seqs.length === 0) return out;
    const rows = await this.deps.db
      .selectFrom('alert_events')
      .select(['sensor_seq', 'severity'])
      .where('sensor_seq', 'in', [...seqs])
      .where('ended_at', 'is', null)
      .where('withdrawn_at', 'is', null)
      .execute();
    for (const r of rows) if (out.get(r.sensor_seq) !== 'critical') out.set(r.sensor_seq, r.severity);
    return out;
  }

  /** A sensor, its last value and state up to date: what a sensor object shows. */
  async get(accountId: string, id: string): Promise<SensorRow> {
    const found = await this.find(accountId, id);
    if (!this.deps.settle) return found;
    await this.deps.settle([found.seq]);
    return this.find(accountId, id);
  }

  /** The account's sensors among `ids`, their last values and states up to date, as `get` shows one. */
  async getMany(accountId: string, ids: readonly string[]): Promise<SensorRow[]> {
    const { db, sensors, settle } = this.deps;
    const found = await sensors.findMany(db, accountId, ids);
    if (!settle || found.length === 0) return found;
    await settle(found.map((s) => s.seq));
    return sensors.findMany(db, accountId, ids);
  }

  /**
   * The sensor as stored, or 404 `sensor_not_found`: for routes that check it exists or need its
   * ids, and show no sensor object (its state is brought up to date only by `get`).
   */
  async find(accountId: string, id: string): Promise<SensorRow> {
    const sensor = await this.deps.sensors.find(this.deps.db, accountId, id);
    if (!sensor) throw notFound('sensor');
    return sensor;
  }

  /**
   * Told after a rule change committed, with the sensor as reads show it then (the dashboard's live
   * stream: a page open elsewhere shows the new thresholds, whether or not the state moved).
   */
  onRuleUpdated(listener: (sensor: SensorRow) => void): void {
    this.ruleListeners.push(listener);
  }

  /** Changes the rule; the previous rule is kept in the audit trail (`threshold.changed`). */
  async updateRule(by: UserPrincipal, id: string, patch: RulePatch): Promise<SensorRow> {
    const { db, clock, sensors, audit } = this.deps;
    const updated = await db.transaction().execute(async (trx) => {
      // Locked before it is read: two changes at once each keep the other's fields.
      await sensors.lockRule(trx, by.accountId, id);
      const sensor = await sensors.find(trx, by.accountId, id);
      if (!sensor) throw notFound('sensor');
      const before = ruleOf(sensor);
      const after: RuleFields = {
        ok_min: patch.ok_min ?? before.ok_min,
        ok_max: patch.ok_max ?? before.ok_max,
        grace_min: patch.grace_min ?? before.grace_min,
        rule_enabled: patch.rule_enabled === undefined ? before.rule_enabled : patch.rule_enabled ? 1 : 0,
        no_data_min: patch.no_data_min ?? before.no_data_min,
      };
      if (after.ok_min > after.ok_max) {
        throw new Unprocessable(
          'invalid_range',
          `ok_min (${after.ok_min}) is greater than ok_max (${after.ok_max})`,
        );
      }
      if (after.grace_min > MAX_GRACE_MIN) {
        throw new Unprocessable(
          'grace_too_long',
          `grace_min may be at most ${MAX_GRACE_MIN} minutes (6 hours)`,
        );
      }
      await sensors.updateRule(trx, id, after);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'threshold.changed',
        by: by.userId,
        target: id,
        details: { channel_id: sensor.channel_id, before: ruleView(before), after: ruleView(after) },
        ts: clock.nowMicros(),
      });
      await this.deps.ruleChanges?.ruleChanged(trx, sensor, before, after, clock.nowMicros());
      return { ...sensor, ...after };
    });
    this.deps.ruleChanges?.ruleCommitted();
    // The answer shows the state under the new rule, as every read after it does.
    const sensor = this.deps.settle ? await this.get(by.accountId, id) : updated;
    for (const listener of this.ruleListeners) {
      try {
        listener(sensor);
      } catch (err) {
        this.deps.log?.error({ err, sensor_id: sensor.id }, 'rule update listener failed');
      }
    }
    return sensor;
  }
}
