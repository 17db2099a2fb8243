import type { Insertable, Selectable } from 'kysely';
import type { Db } from '../storage/database.ts';
import type { Tables } from '../storage/schema.ts';

export type SensorRow = Selectable<Tables['sensors']>;
export type NewSensor = Insertable<Tables['sensors']>;

export class SensorsRepository {
  async insert(db: Db, row: NewSensor): Promise<SensorRow> {
    return db.insertInto('sensors').values(row).returningAll().executeTakeFirstOrThrow();
  }

  /** A sensor of the account whose device still exists. */
  async find(db: Db, accountId: string, id: string): Promise<SensorRow | undefined> {
    return db
      .selectFrom('sensors')
      .selectAll('sensors')
      .innerJoin('devices', 'devices.id', 'sensors.device_id')
      .where('sensors.id', '=', id)
      .where('sensors.account_id', '=', accountId)
      .where('devices.deleted_at', 'is', null)
      .executeTakeFirst();
  }

  /** The account's sensors among `ids` whose devices still exist. */
  async findMany(db: Db, accountId: string, ids: readonly string[]): Promise<SensorRow[]> {
    if (ids.length === 0) return [];
    return db
      .selectFrom('sensors')
      .selectAll('sensors')
      .innerJoin('devices', 'devices.id', 'sensors.device_id')
      .where('sensors.id', 'in', ids)
      .where('sensors.account_id', '=', accountId)
      .where('devices.deleted_at', 'is', null)
      .orderBy('sensors.seq')
      .execute();
  }

  /** Which sensors (and of which accounts) the channels `seqs` are. */
  async refsOfSeqs(db: Db, seqs: readonly number[]): Promise<{ id: string; account_id: string }[]> {
    if (seqs.length === 0) return [];
    return db.selectFrom('sensors').select(['id', 'account_id']).where('seq', 'in', seqs).execute();
  }

  async seqsOfDevice(db: Db, deviceId: string): Promise<number[]> {
    const rows = await db.selectFrom('sensors').select('seq').where('device_id', '=', deviceId).execute();
    return rows.map((r) => r.seq);
  }

  async listForDevice(db: Db, deviceId: string): Promise<SensorRow[]> {
    return db.selectFrom('sensors').selectAll().where('device_id', '=', deviceId).orderBy('seq').execute();
  }

  async findByKey(db: Db, deviceId: string, kind: string, labelKey: string): Promise<SensorRow | undefined> {
    return db
      .selectFrom('sensors')
      .selectAll()
      .where('device_id', '=', deviceId)
      .where('kind', '=', kind)
      .where('label_key', '=', labelKey)
      .executeTakeFirst();
  }

  /**
   * Takes the sensor's row lock for the rest of the transaction (an update that changes nothing), so
   * that a rule change reads the rule after any other one committing now, not before it.
   */
  async lockRule(db: Db, accountId: string, id: string): Promise<void> {
    await db
      .updateTable('sensors')
      .set((eb) => ({ grace_min: eb.ref('grace_min') }))
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .execute();
  }

  async updateRule(
    db: Db,
    id: string,
    patch: Partial<Pick<SensorRow, 'ok_min' | 'ok_max' | 'grace_min' | 'rule_enabled' | 'no_data_min'>>,
  ): Promise<void> {
    if (Object.keys(patch).length === 0) return;
    await db.updateTable('sensors').set(patch).where('id', '=', id).execute();
  }
}
