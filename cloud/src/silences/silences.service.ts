import { newId } from '../../../shared/ids.ts';
import { formatSeconds, formatSecondsOrNull } from '../../../shared/time.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { notFound, Unprocessable } from '../errors.ts';
import type { UserPrincipal } from '../http/context.ts';
import type { RuleEngine } from '../rules/rule-engine.ts';
import type { SensorsRepository } from '../sensors/sensors.repository.ts';
import type { Db } from '../storage/database.ts';
import { keysetPage, type PageRequest } from '../storage/keyset.ts';
import type { Tables } from '../storage/schema.ts';

export type SilenceRow = Tables['silences'];

export function silenceView(s: SilenceRow) {
  return {
    id: s.id,
    sensor_id: s.sensor_id,
    from: formatSeconds(s.from_ts),
    to: formatSeconds(s.to_ts),
    reason: s.reason,
    created_by: s.created_by,
    created_at: formatSeconds(s.created_at),
    ended_at: formatSecondsOrNull(s.ended_at),
    ended_by: s.ended_by,
  };
}

/**
 * Silence windows (docs/api/rules.md): while one covers the current time the
 * sensor is `silent` and its alarms are recorded with `silenced: true` but announced to nobody.
 * They suppress notifications for the window only: an alarm that outlasts the window is announced
 * when the window ends. Creating and ending one is audit-logged.
 */
export class SilencesService {
  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      sensors: SensorsRepository;
      audit: AuditRepository;
      engine: RuleEngine;
    },
  ) {}

  async create(
    by: UserPrincipal,
    sensorId: string,
    input: { from: number; to: number; reason: string },
  ): Promise<SilenceRow> {
    const { db, clock, sensors, audit, engine } = this.deps;
    const now = clock.nowMicros();
    const row = await db.transaction().execute(async (trx) => {
      const sensor = await sensors.find(trx, by.accountId, sensorId);
      if (!sensor) throw notFound('sensor');
      if (input.to <= input.from) {
        throw new Unprocessable('invalid_range', '`to` must be after `from`', [
          { path: 'to', message: 'must be after from' },
        ]);
      }
      const silence: SilenceRow = {
        id: newId('sil'),
        account_id: by.accountId,
        sensor_id: sensor.id,
        sensor_seq: sensor.seq,
        from_ts: input.from,
        to_ts: input.to,
        reason: input.reason,
        created_by: by.userId,
        created_at: now,
        ended_at: null,
        ended_by: null,
      };
      await trx.insertInto('silences').values(silence).execute();
      // The audit entry last: it holds the account's audit chain lock until commit.
      await engine.silencesChanged(trx, sensor.seq);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'silence.created',
        by: by.userId,
        target: silence.id,
        details: {
          sensor_id: sensor.id,
          from: formatSeconds(input.from),
          to: formatSeconds(input.to),
          reason: input.reason,
        },
        ts: now,
      });
      return silence;
    });
    engine.kick();
    return row;
  }

  /** Newest window first. */
  async list(accountId: string, sensorId: string, page: PageRequest): Promise<SilenceRow[]> {
    const { db, sensors } = this.deps;
    if (!(await sensors.find(db, accountId, sensorId))) throw notFound('sensor');
    const q = db
      .selectFrom('silences')
      .selectAll()
      .where('sensor_id', '=', sensorId)
      .where('account_id', '=', accountId);
    return keysetPage(q, 'from_ts', 'id', 'desc', page).execute();
  }

  /**
   * Ends the window now (one that has not begun is cancelled: it ends where it begins). A window
   * already over is left as it is (still 204, nothing audited).
   */
  async end(by: UserPrincipal, id: string): Promise<void> {
    const { db, clock, audit, engine } = this.deps;
    const now = clock.nowMicros();
    const changed = await db.transaction().execute(async (trx) => {
      const silence = await trx
        .selectFrom('silences')
        .selectAll()
        .where('id', '=', id)
        .where('account_id', '=', by.accountId)
        .executeTakeFirst();
      if (!silence) throw notFound('silence');
      if (silence.to_ts <= now) return false;
      const to = Math.max(silence.from_ts, now);
      await trx
        .updateTable('silences')
        .set({ to_ts: to, ended_at: now, ended_by: by.userId })
        .where('id', '=', id)
        .execute();
      await engine.silencesChanged(trx, silence.sensor_seq);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'silence.ended',
        by: by.userId,
        target: id,
        details: {
          sensor_id: silence.sensor_id,
          planned_to: formatSeconds(silence.to_ts),
          to: formatSeconds(to),
        },
        ts: now,
      });
      return true;
    });
    if (changed) engine.kick();
  }
}
