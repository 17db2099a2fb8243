import type { BridgeConnections } from '../mqtt/mqtt-bridge.ts';
import { findModel } from './models.ts';
import type { DeviceRow } from './devices.repository.ts';

/** `POST /v1/devices/{id}/identify` answers 202 with one of these (docs/api/resources.md). */
export type IdentifyStatus = 'sent' | 'unsupported' | 'unreachable';

/**
 * Makes the device blink (best effort): `cmd/identify` to the MQTT bridges of the device's site.
 * `unsupported` when its model cannot identify, `unreachable` when no bridge of its site is
 * connected (or the bridge is disabled in this process).
 */
export async function identifyDevice(
  device: Pick<DeviceRow, 'account_id' | 'site_id' | 'local_id' | 'model'>,
  connections: BridgeConnections,
  payload: unknown,
): Promise<IdentifyStatus> {
  if (findModel(device.model)?.identify !== true) return 'unsupported';
  const sent = await connections.sendCommand(
    { accountId: device.account_id, siteId: device.site_id, localId: device.local_id },
    'identify',
    payload,
  );
  return sent ? 'sent' : 'unreachable';
}
