import { setImmediate as nextTurn } from 'node:timers/promises';
import { sql, type CompiledQuery } from 'kysely';
import type { Db } from '../storage/database.ts';
import { rollupGroup } from '../storage/layout.ts';
import type { Tables } from '../storage/schema.ts';

export type PublicDeviceRow = Tables['public_devices'];
export type PublicFlagRow = Tables['public_flags'];

/** A flag as the operator's tool lists it: the sensor's kind and place, and whether it is hidden. */
export interface FlagWithPin extends PublicFlagRow {
  kind: string | null;
  nickname: string | null;
  location_name: string | null;
  hidden_at: number | null;
}

/** The kinds of measurement a public device shows as pins (docs/api/public.md). */
export const PIN_KINDS = ['temperature', 'humidity', 'pressure', 'co2'] as const;

/**
 * Public devices per query when the pins are read. SQLite's driver holds the event loop while a
 * query runs (10,000 pins in one query: about 30 ms on a quiet machine, over 100 ms on a busy one),
 * so the pins are read in pages with a turn of the event loop between them.
 */
const PIN_PAGE_DEVICES = 500;

/**
 * A pin as the cloud keeps it: the public fields and what the server needs to answer about it
 * (the channel's sequence number for readings, the owner's account for the `orgs` count). Only the
 * views in `public.view.ts` turn it into an answer, and they copy public fields only.
 */
export interface PinRecord {
  id: string;
  seq: number;
  accountId: string;
  deviceId: string;
  kind: string;
  label: string | null;
  unit: string;
  value: number;
  /** Microseconds. */
  ts: number;
  lat: number;
  lon: number;
  nickname: string;
  locationName: string;
  organisation: string | null;
  model: string;
  /** When the channel's first reading arrived (the channel is made by it), microseconds. */
  since: number;
}

/** The SQL of the public API: settings, the pins, flags and the epoch counter. */
export class PublicRepository {
  async settings(db: Db, deviceId: string): Promise<PublicDeviceRow | undefined> {
    return db.selectFrom('public_devices').selectAll().where('device_id', '=', deviceId).executeTakeFirst();
  }

  async settingsOf(db: Db, deviceIds: readonly string[]): Promise<PublicDeviceRow[]> {
    if (deviceIds.length === 0) return [];
    return db.selectFrom('public_devices').selectAll().where('device_id', 'in', deviceIds).execute();
  }

  async saveSettings(db: Db, row: PublicDeviceRow): Promise<void> {
    const { device_id: _id, ...changes } = row;
    await db
      .insertInto('public_devices')
      .values(row)
      .onConflict((oc) => oc.column('device_id').doUpdateSet(changes))
      .execute();
  }

  /** Grows the epoch: every process's cached answers made before this are stale. */
  async bumpEpoch(db: Db): Promise<void> {
    await db
      .updateTable('public_epoch')
      .set((eb) => ({ epoch: eb('epoch', '+', 1) }))
      .where('id', '=', 1)
      .execute();
  }

  /** The epoch counter: read before every public answer, so its query is compiled once per database. */
  async epoch(db: Db): Promise<number> {
    let query = this.epochQueries.get(db);
    if (!query) {
      query = db.selectFrom('public_epoch').select('epoch').where('id', '=', 1).compile();
      this.epochQueries.set(db, query);
    }
    const { rows } = await db.executeQuery(query);
    return rows[0]?.epoch ?? 0;
  }

  private readonly epochQueries = new WeakMap<Db, CompiledQuery<{ epoch: number }>>();

  /**
   * Every pin: the pin kinds of enabled, live devices, with a reading, not hidden by an operator;
   * in sequence order. Read a page of devices at a time, other work running between the pages.
   */
  async pins(db: Db): Promise<PinRecord[]> {
    const devices = await db
      .selectFrom('public_devices')
      .where('enabled', '=', 1)
      .select('device_id')
      .orderBy('device_id')
      .execute();
    const pins: PinRecord[] = [];
    for (let i = 0; i < devices.length; i += PIN_PAGE_DEVICES) {
      if (i > 0) await nextTurn();
      const last = devices[Math.min(i + PIN_PAGE_DEVICES, devices.length) - 1]!.device_id;
      pins.push(...(await this.pinsOf(db, devices[i]!.device_id, last)));
    }
    return pins.sort((a, b) => a.seq - b.seq);
  }

  /** The pins of the public devices from `first` to `last` in id order (see `pins`). */
  private async pinsOf(db: Db, first: string, last: string): Promise<PinRecord[]> {
    const rows = await db
      .selectFrom('public_devices as p')
      .innerJoin('devices as d', 'd.id', 'p.device_id')
      .innerJoin('sensors as s', 's.device_id', 'p.device_id')
      .leftJoin('public_hidden_sensors as h', 'h.sensor_id', 's.id')
      .where('p.device_id', '>=', first)
      .where('p.device_id', '<=', last)
      .where('p.enabled', '=', 1)
      .where('d.deleted_at', 'is', null)
      .where('s.kind', 'in', PIN_KINDS)
      .where('s.last_value', 'is not', null)
      .where('s.last_ts', 'is not', null)
      .where('h.sensor_id', 'is', null)
      .select([
        's.id',
        's.seq',
        's.account_id',
        's.device_id',
        's.kind',
        's.label',
        's.unit',
        's.last_value',
        's.last_ts',
        's.created_at',
        'p.lat',
        'p.lon',
        'p.nickname',
        'p.location_name',
        'p.organisation',
        'd.model',
      ])
      .orderBy('s.seq')
      .execute();
    return rows.map((r) => ({
      id: r.id,
      seq: Number(r.seq),
      accountId: r.account_id,
      deviceId: r.device_id,
      kind: r.kind,
      label: r.label,
      unit: r.unit,
      value: r.last_value!,
      ts: r.last_ts!,
      lat: r.lat!,
      lon: r.lon!,
      nickname: r.nickname!,
      locationName: r.location_name!,
      organisation: r.organisation,
      model: r.model,
      since: r.created_at,
    }));
  }

  /**
   * Readings per channel in the hourly rollups from `fromHour` on (bucket starts, µs), for these
   * channels: one indexed range per rollup group.
   */
  async readingsSince(db: Db, seqs: readonly number[], fromHour: number): Promise<Map<number, number>> {
    const counts = new Map<number, number>();
    const wanted = new Set(seqs);
    const groups = [...new Set(seqs.map(rollupGroup))].sort((a, b) => a - b);
    for (let i = 0; i < groups.length; i += 500) {
      const rows = await db
        .selectFrom('measurement_rollups')
        .where('grp', 'in', groups.slice(i, i + 500))
        .where('res', '=', 3600)
        .where('bucket', '>=', fromHour)
        .select(['sensor_seq', sql<number>`sum(n)`.as('n')])
        .groupBy('sensor_seq')
        .execute();
      for (const r of rows) {
        const seq = Number(r.sensor_seq);
        if (wanted.has(seq)) counts.set(seq, Number(r.n));
      }
    }
    return counts;
  }

  /** A key of the installation (`installation_secrets`, migration 0018). */
  async installationSecret(db: Db, name: string): Promise<string> {
    const row = await db
      .selectFrom('installation_secrets')
      .select('value')
      .where('name', '=', name)
      .executeTakeFirstOrThrow();
    return row.value;
  }

  async insertFlag(db: Db, row: PublicFlagRow): Promise<void> {
    await db.insertInto('public_flags').values(row).execute();
  }

  /** Flags oldest first (open ones only unless `all`), with the flagged sensor's kind and place. */
  async flags(db: Db, options: { all: boolean }): Promise<FlagWithPin[]> {
    let q = db
      .selectFrom('public_flags as f')
      .leftJoin('sensors as s', 's.id', 'f.sensor_id')
      .leftJoin('public_devices as p', 'p.device_id', 's.device_id')
      .leftJoin('public_hidden_sensors as h', 'h.sensor_id', 'f.sensor_id')
      .selectAll('f')
      .select(['s.kind', 'p.nickname', 'p.location_name', 'h.hidden_at']);
    if (!options.all) q = q.where('f.resolved_at', 'is', null);
    return q.orderBy('f.created_at').orderBy('f.id').execute();
  }

  async findFlag(db: Db, id: string): Promise<PublicFlagRow | undefined> {
    return db.selectFrom('public_flags').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async resolveFlags(
    db: Db,
    where: { id: string } | { sensorId: string },
    resolution: 'hidden' | 'dismissed',
    now: number,
  ): Promise<number> {
    let q = db
      .updateTable('public_flags')
      .set({ resolved_at: now, resolution })
      .where('resolved_at', 'is', null);
    q = 'id' in where ? q.where('id', '=', where.id) : q.where('sensor_id', '=', where.sensorId);
    const result = await q.executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  async sensorExists(db: Db, sensorId: string): Promise<boolean> {
    return Boolean(await db.selectFrom('sensors').select('id').where('id', '=', sensorId).executeTakeFirst());
  }

  async hide(db: Db, sensorId: string, now: number): Promise<void> {
    await db
      .insertInto('public_hidden_sensors')
      .values({ sensor_id: sensorId, hidden_at: now })
      .onConflict((oc) => oc.column('sensor_id').doNothing())
      .execute();
  }

  async unhide(db: Db, sensorId: string): Promise<number> {
    const result = await db
      .deleteFrom('public_hidden_sensors')
      .where('sensor_id', '=', sensorId)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
