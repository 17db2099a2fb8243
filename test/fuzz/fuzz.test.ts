import { describe, expect, it } from '@jest/globals';
import { runFuzz } from '../../scripts/fuzz/run.ts';
import { DATABASES } from '../helpers/databases.ts';

/**
 * The short form of `npm run fuzz` (docs/reliability.md): 2,000 generated HTTP requests over every
 * route of the OpenAPI document and the dashboard's `/app/api` (valid, boundary and malformed; admin
 * token, device token, session cookie, none),
 * random bytes on the protobuf webhook among them, and 100 malformed MQTT sessions on the bridge.
 * No 5xx (a 503 `db_unavailable` excepted), no unhandled rejection, the process still serving.
 * The seed is fixed so a failure here replays with `npm run fuzz -- --requests 2000 --mqtt 100 --seed 24`.
 */
describe.each(DATABASES)('fuzzing on %s', (db) => {
  it('answers every generated request and packet without a 5xx, and keeps serving', async () => {
    const report = await runFuzz({ db, requests: 2000, mqttSessions: 100, seed: 24 });
    expect(report.tally.failures).toEqual([]);
    expect(report.unhandled).toEqual([]);
    expect(report.errorLogs).toEqual([]);
    expect(report.alive).toBe(true);
    const families = [...report.tally.rows.keys()];
    expect(families).toEqual(
      expect.arrayContaining([
        'sites',
        'devices',
        'ingest',
        'alert-rules',
        'api/public',
        'app/api',
        'app/api/stream',
        'mqtt (sessions)',
      ]),
    );
    // The dashboard surface is reached with the run's session, not only refused.
    expect(report.tally.rows.get('app/api')!.s2xx).toBeGreaterThan(0);
    expect(report.tally.rows.get('app/api/stream')!.s2xx).toBeGreaterThan(0);
    const total = [...report.tally.rows.values()].reduce((n, r) => n + r.requests, 0);
    expect(total).toBeGreaterThanOrEqual(2000);
  }, 300_000);
});
