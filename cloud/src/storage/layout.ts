/**
 * How measurements are laid out on disk, in both databases.
 *
 * The primary key is (grp, ts, sensor_seq) with `grp = sensor_seq >> MEASUREMENT_GROUP_SHIFT`: the
 * 16 channels of a group share one time-ordered run of pages. Keyed by (sensor_seq, ts) alone,
 * every channel has its own insertion point, so a commit that carries one new point for each of N
 * channels dirties N leaf pages (4 KiB written for a 24-byte row); with groups it dirties N/16,
 * which more than doubled ingest throughput on SQLite (docs/design/ingest.md). A channel's range read
 * scans its group's rows in that range (16 channels' worth) and filters by sensor_seq; long ranges
 * are served from rollups.
 *
 * The key is still exactly the dedup rule: (grp, ts, sensor_seq) is unique iff (sensor_seq, ts) is.
 */
export const MEASUREMENT_GROUP_SHIFT = 4;

export function measurementGroup(sensorSeq: number): number {
  return sensorSeq >> MEASUREMENT_GROUP_SHIFT;
}
