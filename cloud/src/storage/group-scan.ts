import { sql } from 'kysely';
import type { Db, Dialect } from './database.ts';

/** How one database reads a measurement group's readings. */
export interface GroupScan {
  /**
   * About how many readings one `read` should cover: its whole answer is held at once, and what a
   * young-generation collection finds alive moves to the old generation, which is collected far
   * less often (SQLite: one object per reading, so a few thousand; PostgreSQL: a few buffers).
   */
  readonly readingsPerQuery: number;
  /**
   * Reads the measurements of the channels `seqs` of one measurement group (storage/layout.ts)
   * with `from <= ts < to` and hands each to `visit`: every channel's readings in time order, the
   * channels' readings interleaved in any way. Both databases scan the group's range of the
   * primary key once.
   */
  read(
    db: Db,
    grp: number,
    seqs: readonly number[],
    from: number,
    to: number,
    visit: (seq: number, ts: number, value: number) => void,
  ): Promise<void>;
}

/**
 * The scan for `dialect`. SQLite hands out one row per reading. PostgreSQL answers with one row per
 * channel whose times and values are packed as big-endian 8-byte integers and doubles (`int8send`,
 * `float8send`): the driver makes a JavaScript object per row it returns, and over millions of
 * readings those objects reach the old generation faster than it is collected (over a hundred MB
 * for a month of 50 one-minute channels); packed, a query makes a few objects.
 * The values are the stored doubles bit for bit.
 */
export function groupScan(dialect: Dialect): GroupScan {
  return dialect === 'postgres'
    ? { readingsPerQuery: 32_768, read: readPacked }
    : { readingsPerQuery: 2_048, read: readRows };
}

type Read = GroupScan['read'];

const readRows: Read = async (db, grp, seqs, from, to, visit) => {
  const result = await sql<{ sensor_seq: number; ts: number; value: number }>`
    SELECT sensor_seq, ts, value FROM measurements
    WHERE grp = ${grp} AND ts >= ${from} AND ts < ${to} AND sensor_seq IN (${sql.join(seqs)})
    ORDER BY ts`.execute(db);
  for (const r of result.rows) visit(r.sensor_seq, r.ts, r.value);
};

const TWO_TO_32 = 2 ** 32;

const readPacked: Read = async (db, grp, seqs, from, to, visit) => {
  const result = await sql<{ sensor_seq: number; ts: Buffer; value: Buffer }>`
    SELECT sensor_seq,
           string_agg(int8send(ts), ''::bytea ORDER BY ts) AS ts,
           string_agg(float8send(value), ''::bytea ORDER BY ts) AS value
    FROM measurements
    WHERE grp = ${grp} AND ts >= ${from} AND ts < ${to} AND sensor_seq IN (${sql.join(seqs)})
    GROUP BY sensor_seq`.execute(db);
  for (const r of result.rows) {
    const seq = Number(r.sensor_seq);
    for (let i = 0; i < r.ts.length; i += 8) {
      // A microsecond time fits in 2^53, so the two 32-bit halves give it exactly.
      visit(seq, r.ts.readInt32BE(i) * TWO_TO_32 + r.ts.readUInt32BE(i + 4), r.value.readDoubleBE(i));
    }
  }
};
