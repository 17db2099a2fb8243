import path from 'node:path';
import { parseArgs } from 'node:util';
import { Cloud } from '../../cloud/src/cloud.ts';
import { loadConfig } from '../../cloud/src/config.ts';
import { createLogger } from '../../cloud/src/logger.ts';
import { apiClient, setUpAccount } from '../bench/lib.ts';
import { serveAgent } from './agent.ts';
import type { CloudPoint } from './ledger.ts';

/**
 * The cloud, run by the rig inside the cloud's namespace (SQLite, HTTP on 127.0.0.1:8080 of that
 * namespace, the MQTT bridge on `--listen`:8883). It signs an account up as a person would, makes a
 * site and an MQTT bridge (POST /v1/bridges), and announces the bridge bundle, its `mqtt_url` the
 * WAN address. Command `points`: every point of every channel of the site, read through the
 * public REST API (GET /v1/devices, /v1/devices/{id}/sensors, /v1/channels/{id}/measurements).
 */
async function main(): Promise<void> {
  const { values } = parseArgs({ options: { listen: { type: 'string' }, dir: { type: 'string' } } });
  const listen = values.listen!;
  const config = loadConfig({
    PORT: '8080',
    HOST: '0.0.0.0',
    MQTT_PORT: '8883',
    MQTT_URL: `mqtts://${listen}:8883`,
    BASE_URL: 'http://127.0.0.1:8080/',
    DATA_DIR: path.join(values.dir!, 'cloud'),
    LOG_LEVEL: 'warn',
    RATE_LIMIT_MODE: 'warn',
  });
  const cloud = new Cloud({ config, log: createLogger('warn', process.stderr), mqttListenPort: 8883 });
  await cloud.start();
  const url = 'http://127.0.0.1:8080';
  const account = await setUpAccount(url, config.dataDir, 0);
  const api = apiClient(url, account.token);
  const bundle = await api<Record<string, string>>('POST', '/v1/bridges', {
    site_id: account.siteId,
    name: 'HIL gateway',
  });

  const points = async (): Promise<CloudPoint[]> => {
    const out: CloudPoint[] = [];
    const devices = (
      await api<{ data: { id: string; local_id: string }[] }>(
        'GET',
        `/v1/devices?site_id=${account.siteId}&limit=500`,
      )
    ).data;
    const from = encodeURIComponent(new Date(Date.now() - 23 * 3600_000).toISOString());
    for (const d of devices) {
      const sensors = (
        await api<{ data: { channel_id: string; kind: string; label: string | null }[] }>(
          'GET',
          `/v1/devices/${d.id}/sensors`,
        )
      ).data;
      for (const s of sensors) {
        let cursor: string | null = null;
        do {
          const page: { data: { ts: string; value: number }[]; next_cursor: string | null } = await api(
            'GET',
            `/v1/channels/${s.channel_id}/measurements?from=${from}&limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
          );
          for (const p of page.data)
            out.push({
              device: d.local_id,
              kind: s.kind,
              label: s.label ?? null,
              ts: Date.parse(p.ts),
              value: p.value,
            });
          cursor = page.next_cursor;
        } while (cursor);
      }
    }
    return out;
  };

  serveAgent({ bundle, siteId: account.siteId }, { points }, () => cloud.stop());
}

main().catch((err: unknown) => {
  process.stderr.write(
    `cloud agent failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
