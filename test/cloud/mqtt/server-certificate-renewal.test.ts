import { afterEach, describe, expect, it } from '@jest/globals';
import tls from 'node:tls';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { createSite } from '../../helpers/fixtures.ts';
import { createBridge, type BridgeBundle } from '../../helpers/mqtt.ts';

const DAY_MS = 24 * 3600 * 1000;

/**
 * The bridge's server certificate (two years) is renewed by the running process 30 days before its
 * end and served to the next handshakes: a process running past the end served an expired one,
 * which every bridge refuses, until it was restarted.
 */
describe('the MQTT server certificate of a long-running process', () => {
  let t: TestCloud;
  afterEach(async () => t?.stop());

  /** The certificate the bridge's listener presents now, read in a TLS handshake with a bridge's own. */
  function served(bundle: BridgeBundle): Promise<tls.PeerCertificate> {
    return new Promise((resolve, reject) => {
      const socket = tls.connect({
        host: '127.0.0.1',
        port: t.cloud.mqttPort,
        cert: bundle.cert_pem,
        key: bundle.key_pem,
        rejectUnauthorized: false, // the renewed one starts in the test's future
      });
      socket.once('secureConnect', () => {
        resolve(socket.getPeerCertificate());
        socket.destroy();
      });
      socket.once('error', reject);
    });
  }

  it('renews it 30 days before its end, and new connections get the new one', async () => {
    const clock = new ManualClock(Date.now() * 1000);
    t = await startTestCloud({ mqtt: true, clock });
    const user = await signUp(t, 'ops@example.com');
    const bundle = await createBridge(t, user.token, (await createSite(t, user.token)).id);
    const first = await served(bundle);
    const { mqtt } = t.cloud.services;
    expect(await mqtt.renewServerCertificate()).toBe(false); // far from its end
    clock.advanceMs(700 * DAY_MS); // 30 days before the end of its 730
    expect(await mqtt.renewServerCertificate()).toBe(true);
    const second = await served(bundle);
    expect(second.serialNumber).not.toBe(first.serialNumber);
    expect(Date.parse(second.valid_to) - Date.parse(first.valid_to)).toBeGreaterThan(600 * DAY_MS);
    expect(await mqtt.renewServerCertificate()).toBe(false);
  });
});
