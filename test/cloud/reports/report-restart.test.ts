import { createHash } from 'node:crypto';
import { afterAll, describe, expect, it } from '@jest/globals';
import BetterSqlite3 from 'better-sqlite3';
import { measurementGroup } from '../../../cloud/src/storage/layout.ts';
import { signUp, startTestCloud } from '../../helpers/cloud.ts';
import pg from 'pg';
import { DATABASES, type TestDatabase } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createDevice, createSite, insertSensor } from '../../helpers/fixtures.ts';
import { HttpClient } from '../../helpers/http.ts';
import { spawnCloud, type CloudProcess } from '../../helpers/process.ts';

const MINUTE = 60_000_000;
const MARCH_FROM = Date.UTC(2026, 2, 1) * 1000;
const CHANNELS = 8;
const DAYS = 31;
const CLAIM_SECONDS = 3;

/**
 * A report whose process dies mid-render is made anyway: the cloud is killed with SIGKILL while the
 * report is `running`; after a restart on the same data the job's claim expires, the job is claimed
 * again, and the report becomes ready with a file matching its size and sha256.
 */
describe.each(DATABASES)('a report job across a SIGKILL on %s', (kind) => {
  let proc: CloudProcess | null = null;
  let database: TestDatabase | null = null;
  afterAll(async () => {
    if (proc && proc.child.exitCode === null) {
      proc.child.kill('SIGKILL');
      await proc.exited;
    }
    await database?.dispose();
  });

  it('is claimed again after a restart and becomes ready', async () => {
    // An installation with a month of 1-minute data on 8 channels, and a report queued while no
    // job runner runs (made through the API of an in-process cloud on the same data directory).
    const setup = await startTestCloud({ db: kind });
    database = setup.database;
    const { dataDir, schema } = database;
    // The process of `npm start` on the same data: the same SQLite file, or the test's own
    // PostgreSQL schema as the connection's search path.
    const env = {
      // A report's claim lapses after 30 s, or after JOB_CLAIM_SECONDS where shorter.
      JOB_CLAIM_SECONDS: String(CLAIM_SECONDS),
      DATA_DIR: dataDir,
      DATABASE_URL: schema
        ? `${database.url}?options=${encodeURIComponent(`-c search_path=${schema}`)}`
        : database.url,
    };
    const user = await signUp(setup, 'ops@example.com');
    const site = await createSite(setup, user.token, { name: 'Cold Store' });
    const device = await createDevice(setup, user.token, site.id, { name: 'Fridge' });
    const { db } = setup.cloud.services;
    const sensors: Awaited<ReturnType<typeof insertSensor>>[] = [];
    for (let c = 0; c < CHANNELS; c++)
      sensors.push(
        await insertSensor(
          setup,
          { accountId: user.accountId, deviceId: device.id },
          { label: `probe ${c}` },
        ),
      );
    await db.transaction().execute(async (trx) => {
      for (const [c, sensor] of sensors.entries()) {
        const rows = Array.from({ length: DAYS * 1440 }, (_, i) => ({
          grp: measurementGroup(sensor.seq),
          sensor_seq: sensor.seq,
          ts: MARCH_FROM + i * MINUTE,
          value: 3 + Math.sin(i / 90) + c / 10,
        }));
        for (let i = 0; i < rows.length; i += 2000)
          await trx
            .insertInto('measurements')
            .values(rows.slice(i, i + 2000))
            .execute();
      }
    });
    await setup.cloud.services.jobs.stop();
    const created = await setup.http.post(
      '/v1/reports',
      {
        site_id: site.id,
        template: 'haccp_monthly',
        language: 'en',
        period: { from: '2026-03-01T00:00:00Z', to: '2026-04-01T00:00:00Z' },
      },
      { token: user.token },
    );
    expect(created.status).toBe(202);
    const id = created.json.id as string;
    await setup.cloud.stop();

    // The first process claims the job at start; it dies while the report is running (watched in
    // the database itself, as the job may run before the process listens).
    const watcher = await stateWatcher(database, id);
    let killedWhile = '';
    const killed = new Promise<void>((resolve, reject) => {
      void spawnCloud(env, (child) => {
        const watch = async (): Promise<void> => {
          const state = await watcher.state();
          if (state === 'queued') return void setImmediate(() => void watch().catch(reject));
          killedWhile = state;
          child.kill('SIGKILL');
          child.on('exit', () => resolve());
        };
        watch().catch(reject);
      }).catch(() => undefined); // it dies before it listens, or just after
    });
    await killed;
    expect(killedWhile).toBe('running');
    expect(await watcher.state()).toBe('running');
    await watcher.close();

    // Restarted on the same data: the report, left running by nobody, becomes ready once the dead
    // process's claim lapses, CLAIM_SECONDS after it was taken (on a slow machine that may already be
    // so when the restart answers).
    proc = await spawnCloud(env);
    const second = new HttpClient(proc.url);
    let last: unknown = null;
    const ready = await eventually(
      async () => {
        const r = await second.get(`/v1/reports/${id}`, { token: user.token });
        last = r.json;
        return r.json.state === 'ready' ? r.json : null;
      },
      'the report to be ready after the restart',
      90_000,
      250, // within the API's rate limit for one token
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}; last seen: ${JSON.stringify(last)}\n${proc?.stderr()}`);
    });
    const file = await fetch(`${proc.url}/v1/reports/${id}/file`, {
      headers: { authorization: `Bearer ${user.token}` },
    });
    const bytes = Buffer.from(await file.arrayBuffer());
    expect(bytes.length).toBe(ready.size_bytes);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(ready.sha256);
    expect(bytes.subarray(0, 5).toString('latin1')).toBe('%PDF-');
    proc.child.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
  }, 180_000);
});

/** Reads a report's state straight from the database, beside the process under test. */
async function stateWatcher(
  database: TestDatabase,
  id: string,
): Promise<{ state(): Promise<string>; close(): Promise<void> }> {
  const query = 'SELECT state FROM reports WHERE id = $1';
  if (!database.schema) {
    const sqlite = new BetterSqlite3(database.url.slice('sqlite:'.length), { readonly: true });
    const statement = sqlite.prepare(query.replace('$1', '?'));
    return {
      state: async () => (statement.get(id) as { state: string }).state,
      close: async () => {
        sqlite.close();
      },
    };
  }
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  await client.query(`SET search_path TO ${database.schema}`);
  return {
    state: async () => (await client.query<{ state: string }>(query, [id])).rows[0]!.state,
    close: () => client.end(),
  };
}
