import { afterEach, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { newId } from '../../../shared/ids.ts';
import { signUp, startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, tempDir, type DbKind, type TestDatabase } from '../../helpers/databases.ts';
import { alarmEventRow, createDevice, createSite } from '../../helpers/fixtures.ts';

const run = promisify(execFile);

/**
 * docs/operations.md, "Back up and restore", run as written: SQLite's online `.backup` (sqlite3 CLI)
 * and PostgreSQL's `pg_dump -Fc` / `pg_restore`, taken while readings keep arriving, restored into a
 * fresh data directory (and, on PostgreSQL, a fresh database), a cloud started on it. Every
 * measurement acknowledged before the backup began, every event and every audit entry is there, no
 * reading that was never sent, and the audit chain verifies.
 */
describe.each(DATABASES)('backup and restore on %s', (db) => {
  let source: TestCloud | undefined;
  let restored: TestCloud | undefined;
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    await restored?.stop();
    await source?.stop();
    for (const c of cleanups.splice(0).reverse()) await c();
    restored = source = undefined;
  });

  /** Takes the backup as the operator guide says; answers the restored database for a new cloud. */
  async function backUpAndRestore(t: TestCloud, kind: DbKind): Promise<TestDatabase> {
    const backups = tempDir('sm-backup-');
    const dataDir = tempDir('sm-restored-');
    cleanups.push(() => fs.rmSync(backups, { recursive: true, force: true }));
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const pki = path.join(t.database.dataDir, 'pki');
    if (fs.existsSync(pki)) fs.cpSync(pki, path.join(dataDir, 'pki'), { recursive: true });
    if (kind === 'sqlite') {
      const live = t.database.url.replace(/^sqlite:/, '');
      const file = path.join(backups, 'cloud.db');
      await run('sqlite3', [live, `.backup '${file}'`]);
      fs.copyFileSync(file, path.join(dataDir, 'cloud.db'));
      return {
        kind,
        url: `sqlite:${path.join(dataDir, 'cloud.db')}`,
        schema: undefined,
        dataDir,
        dispose: async () => undefined,
      };
    }
    const schema = t.database.schema!;
    const dump = path.join(backups, 'monitor.dump');
    await run('pg_dump', ['-Fc', '-n', schema, '-f', dump, t.database.url]);
    const name = `restore_${randomBytes(5).toString('hex')}`;
    const admin = new pg.Client({ connectionString: t.database.url });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    cleanups.push(async () => {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    });
    const url = new URL(t.database.url);
    url.pathname = `/${name}`;
    await run('pg_restore', ['--no-owner', '-d', url.toString(), dump]);
    return { kind, url: url.toString(), schema, dataDir, dispose: async () => undefined };
  }

  it('restores every measurement, event and audit entry of a backup taken under load, and the audit chain verifies', async () => {
    source = await startTestCloud({
      db,
      env: { RATE_LIMIT_INGEST_PER_MIN: '1000000', RATE_LIMIT_MGMT_PER_MIN: '1000000' },
    });
    const t = source;
    const user = await signUp(t, 'owner@example.com');
    const site = await createSite(t, user.token);
    const device = await createDevice(t, user.token, site.id);
    await t.http.patch(`/v1/sites/${site.id}`, { name: 'Kitchen 2' }, { token: user.token });
    await createSite(t, user.token, { name: 'Bar' });

    const T0 = Date.UTC(2026, 0, 5, 10, 0, 0);
    let n = 0;
    const acked: number[] = [];
    const sent: number[] = [];
    const ingestOne = async () => {
      const ts = T0 + n++ * 1000;
      sent.push(ts);
      const answer = await t.http.post(
        '/v1/ingest',
        {
          device: device.local_id,
          ts: new Date(ts).toISOString(),
          measurements: [{ type: 'temperature', value: 4 + (n % 10) / 10 }],
        },
        { token: device.ingest_token },
      );
      if (answer.status !== 200) throw new Error(`ingest: ${answer.status} ${answer.text}`);
      acked.push(ts);
    };
    for (let i = 0; i < 200; i++) await ingestOne();

    const sensor = await t.cloud.services.db.selectFrom('sensors').selectAll().executeTakeFirstOrThrow();
    const owner = {
      accountId: user.accountId,
      siteId: site.id,
      deviceId: device.id,
      sensor,
      channelId: sensor.channel_id,
    };
    const eventIds = Array.from({ length: 20 }, () => newId('evt'));
    await t.cloud.services.db
      .insertInto('alarm_events')
      .values(eventIds.map((id, i) => alarmEventRow(owner, id, (T0 + i * 60_000) * 1000)))
      .execute();

    // The rule engine opens alarms of its own on these readings: those written so far count too.
    const eventsBefore = (await t.cloud.services.db.selectFrom('alarm_events').select('id').execute()).map(
      (e) => e.id,
    );
    expect(eventsBefore).toEqual(expect.arrayContaining(eventIds));

    // The backup runs while readings keep arriving.
    const ackedBefore = [...acked];
    let writing = true;
    const writer = (async () => {
      while (writing) await ingestOne();
    })();
    const restoredDb = await backUpAndRestore(t, db);
    writing = false;
    await writer;

    const audit = await t.cloud.services.db
      .selectFrom('audit_log')
      .select(['id', 'hash'])
      .orderBy('id')
      .execute();
    expect(audit.length).toBeGreaterThanOrEqual(4);

    restored = await startTestCloud({ db, sameDatabaseAs: { database: restoredDb } as TestCloud });
    const r = restored;
    const stored = await r.cloud.services.db
      .selectFrom('measurements')
      .select('ts')
      .where('sensor_seq', '=', sensor.seq)
      .execute();
    const storedTs = new Set(stored.map((m) => Number(m.ts) / 1000));
    expect(ackedBefore.filter((ts) => !storedTs.has(ts))).toEqual([]); // none lost
    expect([...storedTs].filter((ts) => !sent.includes(ts))).toEqual([]); // none invented
    expect(stored.length).toBe(storedTs.size); // none twice

    const events = await r.cloud.services.db.selectFrom('alarm_events').select('id').execute();
    expect(events.map((e) => e.id)).toEqual(expect.arrayContaining(eventsBefore));
    const restoredAudit = await r.cloud.services.db
      .selectFrom('audit_log')
      .select(['id', 'hash'])
      .orderBy('id')
      .execute();
    expect(restoredAudit).toEqual(audit);

    // The restored cloud serves them: the admin token still works, and the chain verifies.
    const verify = await r.http.get('/v1/audit/verify', { token: user.token });
    expect([verify.status, verify.json.ok]).toEqual([200, true]);
    const listed = await r.http.get(`/v1/accounts/me/audit?limit=100`, { token: user.token });
    expect(listed.status).toBe(200);
    expect((listed.json.data as unknown[]).length).toBe(audit.length);
    const read = await r.http.get(`/v1/channels/${sensor.channel_id}/measurements`, { token: user.token });
    expect(read.status).toBe(200);
  }, 120_000);
});
