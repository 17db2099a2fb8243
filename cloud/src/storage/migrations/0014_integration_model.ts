import type { Migration } from './migration.ts';

/**
 * The model an inbound integration gives the devices it creates (`POST /v1/integrations` `model`):
 * NULL keeps the kind's default (`lorawan-generic` for ChirpStack and The Things Stack,
 * `shelly-ht-gen1` for Shelly URL actions), so integrations made before it behave as they did.
 */
export const integrationModel: Migration = {
  name: '0014_integration_model',
  statements: () => [`ALTER TABLE integrations ADD COLUMN default_model TEXT`],
};
