import type { Migration } from './migration.ts';

/**
 * Measurement groups of 64 channels instead of 16 (`storage/layout.ts`): `grp = sensor_seq >> 6`.
 * Rollups keep groups of 16. Rewrites every stored row's key once (minutes on a large database; see
 * docs/operations.md). The shift is written out here, not imported: a migration must not change
 * when the constant does.
 */
export const measurementGroups: Migration = {
  name: '0006_measurement_groups',
  statements: () => [`UPDATE measurements SET grp = sensor_seq >> 6 WHERE grp <> sensor_seq >> 6`],
};
