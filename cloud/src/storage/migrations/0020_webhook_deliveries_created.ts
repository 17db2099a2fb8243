import type { Migration } from './migration.ts';

/** Finished webhook deliveries are removed 30 days after they were queued, found by this index. */
export const webhookDeliveriesCreated: Migration = {
  name: '0020_webhook_deliveries_created',
  statements: () => [`CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at)`],
};
