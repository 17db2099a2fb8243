import { afterAll, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud } from '../../helpers/cloud.ts';
import { tempDir } from '../../helpers/databases.ts';
import { createDevice, createSite } from '../../helpers/fixtures.ts';
import { HttpClient } from '../../helpers/http.ts';
import { spawnCloud, type CloudProcess } from '../../helpers/process.ts';

/**
 * "A 200 means the measurements are committed": the cloud process is killed with SIGKILL in the
 * middle of a stream of requests; after a restart every measurement that was answered 200 is there.
 */
describe('ingest durability', () => {
  const dataDir = tempDir();
  const env = { DATA_DIR: dataDir, RATE_LIMIT_INGEST_PER_MIN: '1000000' };
  let proc: CloudProcess | null = null;
  afterAll(async () => {
    if (proc && proc.child.exitCode === null) {
      proc.child.kill('SIGKILL');
      await proc.exited;
    }
  });

  it('keeps every measurement answered 200 across a SIGKILL', async () => {
    // An installation with one device, made through the API of an in-process cloud on the same data directory.
    const setup = await startTestCloud({
      env: { DATABASE_URL: `sqlite:${dataDir}/cloud.db`, DATA_DIR: dataDir },
    });
    const user = await signUp(setup, 'ops@example.com');
    const site = await createSite(setup, user.token);
    const device = await createDevice(setup, user.token, site.id, { local_id: 'probe' });
    await setup.cloud.stop();

    proc = await spawnCloud(env);
    const http = new HttpClient(proc.url);
    const answered: { ts: string; value: number }[] = [];
    let stop = false;
    let failures = 0;
    const sender = async (worker: number) => {
      for (let i = 0; !stop; i++) {
        const ts = new Date(Date.UTC(2026, 0, 1) + (worker * 1_000_000 + i) * 1000).toISOString();
        const body = { device: 'probe', ts, measurements: [{ type: 'temperature', value: (i % 50) - 10 }] };
        try {
          const answer = await http.post('/v1/ingest', body, { token: device.ingest_token });
          if (answer.status === 200) answered.push({ ts, value: body.measurements[0]!.value });
        } catch {
          failures++; // the connection died with the process: not answered, so not promised
          return;
        }
      }
    };
    const senders = Array.from({ length: 8 }, (_, w) => sender(w));
    while (answered.length < 400) await new Promise((r) => setImmediate(r));
    proc.child.kill('SIGKILL');
    expect(await proc.exited).toBe('SIGKILL');
    stop = true;
    await Promise.all(senders);
    expect(failures).toBeGreaterThan(0); // requests were in flight when it died

    proc = await spawnCloud(env);
    const after = new HttpClient(proc.url);
    // Sent again, each one is a duplicate: it was stored before the kill.
    const missing: string[] = [];
    for (const { ts, value } of answered) {
      const answer = await after.post(
        '/v1/ingest',
        { device: 'probe', ts, measurements: [{ type: 'temperature', value }] },
        { token: device.ingest_token },
      );
      if (answer.json.deduplicated !== 1) missing.push(ts);
    }
    expect(missing).toEqual([]);
    proc.child.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
  }, 60_000);
});
