/**
 * How measurements and their rollups are laid out on disk, in both databases.
 *
 * The primary key is (grp, ts, sensor_seq) with `grp = sensor_seq >> MEASUREMENT_GROUP_SHIFT`: the
 * 64 channels of a group share one time-ordered run of pages. Keyed by (sensor_seq, ts) alone,
 * every channel has its own insertion point, so a commit that carries one new point for each of N
 * channels dirties N leaf pages (4 KiB written for a 24-byte row); with groups it dirties N/64.
 * Why groups, and why 64: docs/design/ingest.md ("Measurement layout", "Alternatives rejected",
 * with the `BENCH_ONLY=ingest npm run bench` figures). A channel's raw range read scans its group's
 * rows in that range (64 channels' worth) and filters by sensor_seq; long ranges are served from
 * rollups.
 *
 * Rollups (`measurement_rollups`, written once a second by the fold, not per request) keep groups
 * of 16: they serve the dashboards' reads, which then scan fewer neighbours.
 *
 * The key is still exactly the dedup rule: (grp, ts, sensor_seq) is unique iff (sensor_seq, ts) is.
 */
export const MEASUREMENT_GROUP_SHIFT = 6;
export const ROLLUP_GROUP_SHIFT = 4;

export function measurementGroup(sensorSeq: number): number {
  return sensorSeq >> MEASUREMENT_GROUP_SHIFT;
}

export function rollupGroup(sensorSeq: number): number {
  return sensorSeq >> ROLLUP_GROUP_SHIFT;
}

/** The rollup groups `[first, end)` that hold the channels of measurement group `grp`. */
export function rollupGroupsOf(grp: number): [number, number] {
  const k = MEASUREMENT_GROUP_SHIFT - ROLLUP_GROUP_SHIFT;
  return [grp << k, (grp + 1) << k];
}
