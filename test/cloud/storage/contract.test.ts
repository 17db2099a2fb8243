import { spawn } from 'node:child_process';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { sql } from 'kysely';
import { newId } from '../../../shared/ids.ts';
import { AccountsRepository } from '../../../cloud/src/accounts/accounts.repository.ts';
import { AuditRepository } from '../../../cloud/src/audit/audit.repository.ts';
import {
  AuthRepository,
  type LoginCodeRow,
  type SessionRow,
} from '../../../cloud/src/auth/auth.repository.ts';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { DevicesRepository, type DeviceRow } from '../../../cloud/src/devices/devices.repository.ts';
import { JobQueue, type JobHandler } from '../../../cloud/src/jobs/job-queue.ts';
import { mailJobHandler } from '../../../cloud/src/mail/mail-job.ts';
import type { Mailer } from '../../../cloud/src/mail/mailer.ts';
import { IdempotencyStore } from '../../../cloud/src/limits/idempotency.ts';
import { RateLimiter } from '../../../cloud/src/limits/rate-limiter.ts';
import { createLogger } from '../../../cloud/src/logger.ts';
import { SensorsRepository, type NewSensor } from '../../../cloud/src/sensors/sensors.repository.ts';
import { SitesRepository, type SiteRow } from '../../../cloud/src/sites/sites.repository.ts';
import {
  isUniqueViolation,
  openDatabase,
  type Database,
  type Db,
} from '../../../cloud/src/storage/database.ts';
import { MIGRATIONS } from '../../../cloud/src/storage/migrations/index.ts';
import { TokensRepository, type ApiTokenRow } from '../../../cloud/src/tokens/tokens.repository.ts';
import { DATABASES, testDatabase, type TestDatabase } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { ROOT } from '../../helpers/process.ts';

/**
 * The storage contract: every repository and every piece of shared state (rate limits, idempotency
 * keys, jobs) behaves the same on SQLite and PostgreSQL, down to the types of the values read back.
 */
const T0 = Date.UTC(2026, 0, 5, 10, 0, 0) * 1000;
const MINUTE = 60 * 1_000_000;
const DAY = 24 * 60 * MINUTE;

/** The error a promise rejects with (the test fails when it resolves). */
async function failure(work: Promise<unknown>): Promise<unknown> {
  try {
    await work;
  } catch (err) {
    return err;
  }
  throw new Error('expected the operation to fail');
}

/** A logger whose lines the test can read. */
function capturedLogger() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { log: createLogger('debug', sink), lines };
}

/**
 * Opens (and so migrates) the database from `count` processes of their own, as replicas starting
 * together do: each loads the code first, then all open at the same moment. Answers each one's outcome.
 */
async function openFromProcesses(target: TestDatabase, count: number, moduleFile: string): Promise<string[]> {
  const script = `
    const { openDatabase } = await import(${JSON.stringify(moduleFile)});
    process.stdout.write('ready\\n');
    process.stdin.once('data', async () => {
      const database = await openDatabase(process.env.DB_URL, { schema: process.env.DB_SCHEMA || undefined });
      await database.close();
      process.stdout.write('opened');
      process.exit(0);
    });`;
  const children = Array.from({ length: count }, () =>
    spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, DB_URL: target.url, DB_SCHEMA: target.schema ?? '' },
    }),
  );
  const started = children.map((child) => {
    let out = '';
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const ready = new Promise<void>((resolve) =>
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        if (out.startsWith('ready\n')) resolve();
      }),
    );
    const exit = new Promise<string>((resolve) =>
      child.on('exit', (code) => resolve(code === 0 ? out.slice('ready\n'.length) : `exit ${code}: ${err}`)),
    );
    return { ready, exit };
  });
  // all loaded (or one already failed, which the outcomes then show)
  await Promise.race([Promise.all(started.map((s) => s.ready)), Promise.race(started.map((s) => s.exit))]);
  for (const child of children) if (child.exitCode === null) child.stdin.write('go\n');
  return Promise.all(started.map((s) => s.exit));
}

const DATABASE_MODULE = path.join(ROOT, 'cloud/src/storage/database.ts');

describe.each(DATABASES)('storage contract on %s', (kind) => {
  let target: TestDatabase;
  let database: Database;
  let db: Db;
  const extra: Database[] = [];

  beforeEach(async () => {
    target = testDatabase(kind);
    database = await openDatabase(target.url, { schema: target.schema });
    db = database.db;
  });
  afterEach(async () => {
    for (const d of extra.splice(0)) await d.close();
    await database?.close();
    await target?.dispose();
  });

  /** Another process's connection to the same database. */
  async function openAgain(): Promise<Database> {
    const again = await openDatabase(target.url, { schema: target.schema });
    extra.push(again);
    return again;
  }

  const accounts = new AccountsRepository();
  const auth = new AuthRepository();
  const tokens = new TokensRepository();
  const sites = new SitesRepository();
  const devices = new DevicesRepository();
  const sensors = new SensorsRepository();
  const audit = new AuditRepository();

  async function anAccount(email = `${newId('usr')}@example.com`) {
    const accountId = newId('acc');
    const user = { id: newId('usr'), account_id: accountId, email, created_at: T0 };
    await accounts.createAccountWithUser(db, { id: accountId, name: email, created_at: T0 }, user);
    return { accountId, userId: user.id };
  }

  function siteRow(accountId: string, fields: Partial<SiteRow> = {}): SiteRow {
    return {
      id: newId('site'),
      account_id: accountId,
      name: 'Kitchen',
      vertical: 'food_service',
      timezone: 'UTC',
      created_at: T0,
      deleted_at: null,
      ...fields,
    };
  }

  function deviceRow(accountId: string, siteId: string, fields: Partial<DeviceRow> = {}): DeviceRow {
    return {
      id: newId('dev'),
      account_id: accountId,
      site_id: siteId,
      local_id: newId('dev'),
      name: 'Fridge',
      notes: '',
      model: 'http-generic',
      fw_version: null,
      token_hash: newId('dev'),
      token_issued_at: T0,
      last_seen_at: null,
      online: 0,
      created_at: T0,
      deleted_at: null,
      ...fields,
    };
  }

  function sensorRow(accountId: string, deviceId: string, fields: Partial<NewSensor> = {}): NewSensor {
    return {
      id: newId('snr'),
      channel_id: newId('chn'),
      account_id: accountId,
      device_id: deviceId,
      kind: 'temperature',
      label: null,
      label_key: '',
      unit: '°C',
      ok_min: 0,
      ok_max: 5,
      grace_min: 30,
      rule_enabled: 1,
      no_data_min: 60,
      last_value: null,
      last_ts: null,
      state: 'no_data',
      created_at: T0,
      ...fields,
    };
  }

  async function aDevice(fields: Partial<DeviceRow> = {}) {
    const { accountId, userId } = await anAccount();
    const site = siteRow(accountId);
    await sites.insert(db, site);
    const device = deviceRow(accountId, site.id, fields);
    await devices.insert(db, device);
    return { accountId, userId, site, device };
  }

  describe('migrations', () => {
    it('are idempotent: opening the database again applies nothing twice and keeps the data', async () => {
      const { accountId } = await anAccount('kept@example.com');
      const again = await openAgain();
      expect(await accounts.findAccount(again.db, accountId)).toMatchObject({ id: accountId });
      const applied = await again.db
        .selectFrom('schema_migrations' as never)
        .select('name' as never)
        .execute();
      expect(applied.map((r) => (r as { name: string }).name)).toEqual(MIGRATIONS.map((m) => m.name));
    });

    it('keep the ingest journal uncompressed on PostgreSQL (its float64 points do not compress)', async () => {
      if (kind !== 'postgres') return;
      const { rows } = await sql<{ attstorage: string }>`SELECT attstorage FROM pg_attribute
        WHERE attrelid = 'ingest_journal'::regclass AND attname = 'points'`.execute(db);
      expect(rows).toEqual([{ attstorage: 'e' }]);
    });

    it('survive several processes starting at once on a fresh database', async () => {
      const fresh = testDatabase(kind);
      try {
        const exits = await openFromProcesses(fresh, 6, DATABASE_MODULE);
        expect(exits).toEqual(Array(6).fill('opened'));
        const opened = await openDatabase(fresh.url, { schema: fresh.schema });
        extra.push(opened);
        const applied = await opened.db
          .selectFrom('schema_migrations' as never)
          .select('name' as never)
          .execute();
        expect(applied).toHaveLength(MIGRATIONS.length);
      } finally {
        for (const d of extra.splice(0)) await d.close();
        await fresh.dispose();
      }
    });
  });

  describe('isUniqueViolation', () => {
    it('recognises a real unique violation and nothing else', async () => {
      await anAccount('same@example.com');
      const duplicate = await failure(anAccount('same@example.com'));
      expect(isUniqueViolation(duplicate)).toBe(true);

      const site = siteRow('acc_missing');
      const foreignKey = await failure(sites.insert(db, site));
      expect(isUniqueViolation(foreignKey)).toBe(false);
      const notNull = await failure(
        db
          .insertInto('accounts')
          .values({ id: 'acc_x', name: null as unknown as string, created_at: T0 })
          .execute(),
      );
      expect(isUniqueViolation(notNull)).toBe(false);
      expect(isUniqueViolation(new Error('unique'))).toBe(false);
      expect(isUniqueViolation(null)).toBe(false);
    });

    it('sees a violation of a primary key too', async () => {
      const { accountId } = await anAccount();
      const err = await failure(
        db.insertInto('accounts').values({ id: accountId, name: 'again', created_at: T0 }).execute(),
      );
      expect(isUniqueViolation(err)).toBe(true);
    });
  });

  describe('AccountsRepository', () => {
    it('creates an account with its user and finds them by id and e-mail', async () => {
      const { accountId, userId } = await anAccount('chef@example.com');
      expect(await accounts.findAccount(db, accountId)).toEqual({
        id: accountId,
        name: 'chef@example.com',
        created_at: T0,
      });
      const user = { id: userId, account_id: accountId, email: 'chef@example.com', created_at: T0 };
      expect(await accounts.findUserByEmail(db, 'chef@example.com')).toEqual(user);
      expect(await accounts.findUser(db, userId)).toEqual(user);
      expect(await accounts.listUsers(db, accountId)).toEqual([user]);
      expect(await accounts.findUserByEmail(db, 'nobody@example.com')).toBeUndefined();
      expect(await accounts.findAccount(db, 'acc_none')).toBeUndefined();
    });

    it('keeps nothing of a transaction that fails half-way', async () => {
      const err = await failure(
        db.transaction().execute(async (trx) => {
          const accountId = newId('acc');
          await accounts.createAccountWithUser(
            trx,
            { id: accountId, name: 'x', created_at: T0 },
            { id: newId('usr'), account_id: accountId, email: 'half@example.com', created_at: T0 },
          );
          throw new Error('boom');
        }),
      );
      expect((err as Error).message).toBe('boom');
      expect(await accounts.findUserByEmail(db, 'half@example.com')).toBeUndefined();
    });
  });

  describe('AuthRepository', () => {
    function code(email: string, fields: Partial<LoginCodeRow> = {}): LoginCodeRow {
      return {
        id: newId('lc'),
        email,
        code_hash: newId('lc'),
        link_hash: newId('lc'),
        state: 'issued',
        attempts: 0,
        created_at: T0,
        expires_at: T0 + 10 * MINUTE,
        browser_hash: null,
        ...fields,
      };
    }

    it('finds the issued code, by e-mail and by link, holds one per e-mail, and invalidates it', async () => {
      const first = code('a@example.com');
      const second = code('a@example.com', { created_at: T0 + 1 });
      await auth.insertCode(db, first);
      expect(await auth.findIssuedCodeByLink(db, first.link_hash)).toEqual(first);
      // One issued code per e-mail (migration 0019): a second is refused until the first goes.
      await failure(auth.insertCode(db, second));
      await auth.invalidateIssuedCodes(db, 'a@example.com');
      await auth.insertCode(db, second);
      expect(await auth.latestIssuedCode(db, 'a@example.com')).toEqual(second);
      expect(await auth.findIssuedCodeByLink(db, first.link_hash)).toBeUndefined();
      await auth.invalidateIssuedCodes(db, 'a@example.com');
      expect(await auth.latestIssuedCode(db, 'a@example.com')).toBeUndefined();
      expect(await auth.findIssuedCodeByLink(db, second.link_hash)).toBeUndefined();
    });

    it('claims attempts up to the limit, concurrent claims included, and leaves the link usable', async () => {
      const row = code('a@example.com');
      await auth.insertCode(db, row);
      expect(await auth.claimAttempt(db, row.id, 2)).toMatchObject({ id: row.id, attempts: 1 });
      const racing = await Promise.all([1, 2, 3].map(() => auth.claimAttempt(db, row.id, 2)));
      expect(racing.filter((r) => r !== undefined)).toEqual([expect.objectContaining({ attempts: 2 })]);
      expect(await auth.latestIssuedCode(db, 'a@example.com')).toMatchObject({ attempts: 2 });
      expect(await auth.claimAttempt(db, row.id, 2)).toBeUndefined();
      expect(await auth.findIssuedCodeByLink(db, row.link_hash)).toMatchObject({ id: row.id });
    });

    it('consumes a code once', async () => {
      const row = code('a@example.com');
      await auth.insertCode(db, row);
      expect(await auth.consumeCode(db, row.id)).toBe(true);
      expect(await auth.consumeCode(db, row.id)).toBe(false);
    });

    it('finds live sessions only, rolls them forward and revokes one or all of a user', async () => {
      const { accountId, userId } = await anAccount();
      const session = (fields: Partial<SessionRow> = {}): SessionRow => ({
        id: newId('ses'),
        user_id: userId,
        account_id: accountId,
        secret_hash: newId('ses'),
        created_at: T0,
        last_seen_at: T0,
        expires_at: T0 + 30 * DAY,
        revoked_at: null,
        ...fields,
      });
      const a = session();
      const b = session();
      const old = session({ revoked_at: T0 });
      for (const s of [a, b, old]) await auth.insertSession(db, s);

      expect(await auth.findLiveSession(db, a.secret_hash, T0)).toEqual(a);
      expect(await auth.findLiveSession(db, a.secret_hash, T0 + 30 * DAY)).toBeUndefined();
      expect(await auth.findLiveSession(db, old.secret_hash, T0)).toBeUndefined();

      await auth.touchSession(db, a.id, T0 + DAY, T0 + 31 * DAY);
      expect(await auth.findLiveSession(db, a.secret_hash, T0 + 30 * DAY)).toMatchObject({
        last_seen_at: T0 + DAY,
        expires_at: T0 + 31 * DAY,
      });

      await auth.revokeSession(db, a.id, T0 + 2);
      expect(await auth.findLiveSession(db, a.secret_hash, T0)).toBeUndefined();
      expect(await auth.revokeUserSessions(db, userId, T0 + 3)).toBe(1); // only b was still live
      expect(await auth.findLiveSession(db, b.secret_hash, T0)).toBeUndefined();
      expect(await auth.revokeUserSessions(db, userId, T0 + 4)).toBe(0);
    });
  });

  describe('TokensRepository', () => {
    async function aToken(accountId: string, userId: string, fields: Partial<ApiTokenRow> = {}) {
      const row: ApiTokenRow = {
        id: newId('tok'),
        account_id: accountId,
        user_id: userId,
        label: 'script',
        scope: 'read',
        token_hash: newId('tok'),
        created_at: T0,
        last_used_at: null,
        revoked_at: null,
        ...fields,
      };
      await tokens.insert(db, row);
      return row;
    }

    it('finds a live token by hash and by id within its account, and not once revoked', async () => {
      const { accountId, userId } = await anAccount();
      const other = await anAccount();
      const row = await aToken(accountId, userId);
      expect(await tokens.findLiveByHash(db, row.token_hash)).toEqual(row);
      expect(await tokens.findLive(db, accountId, row.id)).toEqual(row);
      expect(await tokens.findLive(db, other.accountId, row.id)).toBeUndefined();
      await tokens.revoke(db, row.id, T0 + 1);
      expect(await tokens.findLiveByHash(db, row.token_hash)).toBeUndefined();
      expect(await tokens.findLive(db, accountId, row.id)).toBeUndefined();
      expect(await tokens.list(db, accountId, { limit: 10, after: null })).toEqual([]);
    });

    it('lists oldest first, limit + 1 rows, continuing after a key', async () => {
      const { accountId, userId } = await anAccount();
      const rows = [
        await aToken(accountId, userId, { created_at: T0 + 2 }),
        await aToken(accountId, userId, { created_at: T0 }),
        await aToken(accountId, userId, { created_at: T0 + 1 }),
      ].sort((x, y) => x.created_at - y.created_at);
      expect(await tokens.list(db, accountId, { limit: 2, after: null })).toEqual(rows);
      expect(
        await tokens.list(db, accountId, { limit: 2, after: [rows[0]!.created_at, rows[0]!.id] }),
      ).toEqual(rows.slice(1));
      const other = await anAccount();
      expect(await tokens.list(db, other.accountId, { limit: 2, after: null })).toEqual([]);
    });

    it('writes last_used_at at most once a minute', async () => {
      const { accountId, userId } = await anAccount();
      const row = await aToken(accountId, userId);
      await tokens.touch(db, row.id, T0 + MINUTE);
      await tokens.touch(db, row.id, T0 + MINUTE + 30_000_000);
      expect((await tokens.findLive(db, accountId, row.id))!.last_used_at).toBe(T0 + MINUTE);
      await tokens.touch(db, row.id, T0 + 2 * MINUTE + 1);
      expect((await tokens.findLive(db, accountId, row.id))!.last_used_at).toBe(T0 + 2 * MINUTE + 1);
    });
  });

  describe('SitesRepository', () => {
    it('finds a site within its account only, and not once deleted', async () => {
      const { accountId } = await anAccount();
      const other = await anAccount();
      const site = siteRow(accountId, { timezone: 'Europe/Berlin' });
      await sites.insert(db, site);
      expect(await sites.find(db, accountId, site.id)).toEqual(site);
      expect(await sites.find(db, other.accountId, site.id)).toBeUndefined();
      await sites.delete(db, site.id, T0 + 1);
      expect(await sites.find(db, accountId, site.id)).toBeUndefined();
      expect(await sites.list(db, accountId, { limit: 10, after: null })).toEqual([]);
    });

    it('pages in (created_at, id) order, ties broken by id the same way on both databases', async () => {
      const { accountId } = await anAccount();
      const ids = ['site_B', 'site_a', 'site_A', 'site_b', 'site_0'];
      for (const id of ids) await sites.insert(db, siteRow(accountId, { id }));
      await sites.insert(db, siteRow(accountId, { id: 'site_first', created_at: T0 - 1 }));
      const all = await sites.list(db, accountId, { limit: 10, after: null });
      expect(all.map((s) => s.id)).toEqual(['site_first', 'site_0', 'site_A', 'site_B', 'site_a', 'site_b']);
      const page = await sites.list(db, accountId, { limit: 2, after: [T0, 'site_A'] });
      expect(page.map((s) => s.id)).toEqual(['site_B', 'site_a', 'site_b']);
    });

    it('updates name and time zone, and ignores an empty change', async () => {
      const { accountId } = await anAccount();
      const site = siteRow(accountId);
      await sites.insert(db, site);
      await sites.update(db, site.id, {});
      await sites.update(db, site.id, { name: 'Bar', timezone: 'Asia/Kolkata' });
      expect(await sites.find(db, accountId, site.id)).toEqual({
        ...site,
        name: 'Bar',
        timezone: 'Asia/Kolkata',
      });
    });

    it('counts the live devices of a site', async () => {
      const { accountId, site, device } = await aDevice();
      await devices.insert(db, deviceRow(accountId, site.id));
      expect(await sites.countLiveDevices(db, site.id)).toBe(2);
      await devices.softDelete(db, device.id, T0 + 1);
      expect(await sites.countLiveDevices(db, site.id)).toBe(1);
    });
  });

  describe('DevicesRepository', () => {
    it('finds a live device by id within its account and by local_id within its site', async () => {
      const { accountId, site, device } = await aDevice();
      const other = await anAccount();
      expect(await devices.find(db, accountId, device.id)).toEqual(device);
      expect(await devices.find(db, other.accountId, device.id)).toBeUndefined();
      expect(await devices.findByLocalId(db, site.id, device.local_id)).toEqual(device);
      expect(await devices.findByLocalId(db, 'site_other', device.local_id)).toBeUndefined();
    });

    it('keeps local_id unique among the live devices of a site, and free again once deleted', async () => {
      const { accountId, site, device } = await aDevice({ local_id: 'fridge-1' });
      const clash = await failure(
        devices.insert(db, deviceRow(accountId, site.id, { local_id: 'fridge-1' })),
      );
      expect(isUniqueViolation(clash)).toBe(true);
      const elsewhere = siteRow(accountId);
      await sites.insert(db, elsewhere);
      await devices.insert(db, deviceRow(accountId, elsewhere.id, { local_id: 'fridge-1' }));
      await devices.softDelete(db, device.id, T0 + 1);
      await devices.insert(db, deviceRow(accountId, site.id, { local_id: 'fridge-1' }));
      expect(await devices.findByLocalId(db, site.id, 'fridge-1')).not.toEqual(device);
    });

    it('keeps token hashes unique, and soft delete clears the hash and the online flag', async () => {
      const { accountId, site, device } = await aDevice({ online: 1 });
      const clash = await failure(
        devices.insert(db, deviceRow(accountId, site.id, { token_hash: device.token_hash })),
      );
      expect(isUniqueViolation(clash)).toBe(true);
      await devices.softDelete(db, device.id, T0 + 5);
      const row = await db
        .selectFrom('devices')
        .selectAll()
        .where('id', '=', device.id)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({ ...device, token_hash: null, online: 0, deleted_at: T0 + 5 });
      expect(await devices.find(db, accountId, device.id)).toBeUndefined();
      // a second deleted device: two NULL hashes do not collide
      const second = deviceRow(accountId, site.id);
      await devices.insert(db, second);
      await devices.softDelete(db, second.id, T0 + 6);
    });

    it('lists by account, site, online and model substring (case-insensitive, wildcards literal)', async () => {
      const { accountId, site } = await anAccount().then(async (a) => {
        const s = siteRow(a.accountId);
        await sites.insert(db, s);
        return { ...a, site: s };
      });
      const other = siteRow(accountId);
      await sites.insert(db, other);
      const gen1 = deviceRow(accountId, site.id, { model: 'shelly-ht-gen1', created_at: T0 + 1, online: 1 });
      const http = deviceRow(accountId, site.id, { model: 'http-generic', created_at: T0 + 2 });
      const gen3 = deviceRow(accountId, other.id, { model: 'shelly-ht-gen3', created_at: T0 + 3 });
      const odd = deviceRow(accountId, other.id, { model: 'odd_%\\model', created_at: T0 + 4 });
      for (const d of [gen1, http, gen3, odd]) await devices.insert(db, d);
      const ids = async (filter: Partial<Parameters<DevicesRepository['list']>[1]>) =>
        (await devices.list(db, { accountId, ...filter }, { limit: 10, after: null })).map((d) => d.id);
      expect(await ids({})).toEqual([gen1.id, http.id, gen3.id, odd.id]);
      expect(await ids({ siteId: site.id })).toEqual([gen1.id, http.id]);
      expect(await ids({ online: true })).toEqual([gen1.id]);
      expect(await ids({ online: false, siteId: other.id })).toEqual([gen3.id, odd.id]);
      expect(await ids({ model: 'SHELLY' })).toEqual([gen1.id, gen3.id]);
      expect(await ids({ model: 'ht_gen' })).toEqual([]);
      expect(await ids({ model: '_' })).toEqual([odd.id]);
      expect(await ids({ model: '%' })).toEqual([odd.id]);
      expect(await ids({ model: '\\' })).toEqual([odd.id]);
      expect(await ids({ model: 'd_%\\m' })).toEqual([odd.id]);
      expect(await devices.list(db, { accountId: 'acc_other' }, { limit: 10, after: null })).toEqual([]);
      expect(
        (await devices.list(db, { accountId }, { limit: 1, after: [gen1.created_at, gen1.id] })).map(
          (d) => d.id,
        ),
      ).toEqual([http.id, gen3.id]);
    });

    it('updates name, local_id, notes and the token', async () => {
      const { accountId, device } = await aDevice();
      await devices.update(db, device.id, {});
      await devices.update(db, device.id, {
        name: 'Freezer',
        local_id: 'fz-1',
        notes: 'left',
        token_hash: 'h2',
        token_issued_at: T0 + 9,
      });
      expect(await devices.find(db, accountId, device.id)).toEqual({
        ...device,
        name: 'Freezer',
        local_id: 'fz-1',
        notes: 'left',
        token_hash: 'h2',
        token_issued_at: T0 + 9,
      });
    });
  });

  describe('SensorsRepository', () => {
    it('inserts a sensor and reads back every value with its type (numbers, not strings)', async () => {
      const { accountId, device } = await aDevice();
      const lastTs = T0 + 123_456;
      const row = await sensors.insert(
        db,
        sensorRow(accountId, device.id, {
          ok_min: -2.5,
          last_value: 4.25,
          last_ts: lastTs,
          label: 'door',
          label_key: 'door',
        }),
      );
      expect(row).toEqual({
        ...sensorRow(accountId, device.id),
        id: row.id,
        channel_id: row.channel_id,
        seq: expect.any(Number),
        ok_min: -2.5,
        last_value: 4.25,
        last_ts: lastTs,
        label: 'door',
        label_key: 'door',
        // the rule engine's marker (migration 0002), a number on both databases
        eval_from: null,
        eval_gen: 0,
      });
      expect(await sensors.find(db, accountId, row.id)).toEqual(row);
      expect(await sensors.findByKey(db, device.id, 'temperature', 'door')).toEqual(row);
      expect(await sensors.findByKey(db, device.id, 'temperature', '')).toBeUndefined();
    });

    it('keeps (device, kind, label) unique, an absent label included', async () => {
      const { accountId, device } = await aDevice();
      await sensors.insert(db, sensorRow(accountId, device.id));
      expect(isUniqueViolation(await failure(sensors.insert(db, sensorRow(accountId, device.id))))).toBe(
        true,
      );
      await sensors.insert(db, sensorRow(accountId, device.id, { label: 'probe', label_key: 'probe' }));
      await sensors.insert(db, sensorRow(accountId, device.id, { kind: 'humidity' }));
    });

    it("lists a device's sensors in creation order, and hides them once the device is deleted", async () => {
      const { accountId, device } = await aDevice();
      const other = await anAccount();
      const first = await sensors.insert(db, sensorRow(accountId, device.id, { kind: 'humidity' }));
      const second = await sensors.insert(db, sensorRow(accountId, device.id));
      expect(second.seq).toBeGreaterThan(first.seq);
      expect((await sensors.listForDevice(db, device.id)).map((s) => s.id)).toEqual([first.id, second.id]);
      expect(await sensors.find(db, other.accountId, first.id)).toBeUndefined();
      await devices.softDelete(db, device.id, T0 + 1);
      expect(await sensors.find(db, accountId, first.id)).toBeUndefined();
    });

    it('updates the rule fields', async () => {
      const { accountId, device } = await aDevice();
      const row = await sensors.insert(db, sensorRow(accountId, device.id));
      await sensors.updateRule(db, row.id, {});
      await sensors.updateRule(db, row.id, {
        ok_min: -1.5,
        ok_max: 9.75,
        grace_min: 0,
        rule_enabled: 0,
        no_data_min: 5,
      });
      expect(await sensors.find(db, accountId, row.id)).toEqual({
        ...row,
        ok_min: -1.5,
        ok_max: 9.75,
        grace_min: 0,
        rule_enabled: 0,
        no_data_min: 5,
      });
    });
  });

  describe('AuditRepository', () => {
    it('records entries and lists them newest first, filtered by from (inclusive), to (exclusive) and kind', async () => {
      const { accountId, userId } = await anAccount();
      const other = await anAccount();
      const entry = (kind: 'site.created' | 'site.deleted', ts: number) => ({
        accountId,
        kind,
        by: userId,
        target: 'site_x',
        details: { n: ts - T0, nested: { ok: true } },
        ts,
      });
      for (const [kind, offset] of [
        ['site.created', 0],
        ['site.deleted', 1],
        ['site.created', 2],
        ['site.created', 3],
      ] as const)
        await audit.record(db, entry(kind, T0 + offset));
      await audit.record(db, { ...entry('site.created', T0), accountId: other.accountId });

      const list = (filter: Parameters<AuditRepository['list']>[2]) =>
        audit.list(db, accountId, filter, { limit: 10, after: null });
      const all = await list({});
      expect(all.map((r) => r.ts)).toEqual([T0 + 3, T0 + 2, T0 + 1, T0]);
      expect(all[0]).toEqual({
        id: expect.stringMatching(/^aud_/),
        account_id: accountId,
        ts: T0 + 3,
        kind: 'site.created',
        actor: userId,
        target: 'site_x',
        details: expect.any(String),
        seq: 4,
        prev_hash: all[1]!.hash,
        hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
      expect(JSON.parse(all[0]!.details)).toEqual({ n: 3, nested: { ok: true } });
      expect(await audit.chainHead(db, accountId)).toEqual({
        entryId: all[0]!.id,
        hash: all[0]!.hash,
        entries: 4,
      });
      expect(await audit.chainHead(db, other.accountId)).toMatchObject({ entries: 1 });
      expect(await audit.chainHead(db, 'acc_none')).toEqual({ entryId: null, hash: null, entries: 0 });
      expect((await list({ from: T0 + 1, to: T0 + 3 })).map((r) => r.ts)).toEqual([T0 + 2, T0 + 1]);
      expect((await list({ kind: 'site.deleted' })).map((r) => r.ts)).toEqual([T0 + 1]);
      const page = await audit.list(db, accountId, {}, { limit: 1, after: [all[1]!.ts, all[1]!.id] });
      expect(page.map((r) => r.ts)).toEqual([T0 + 1, T0]);
    });
  });

  describe('RateLimiter', () => {
    it('counts hits per bucket in fixed windows and says when to come back', async () => {
      const clock = new ManualClock(T0 + 15 * 1_000_000); // 15 s into a minute
      const limiter = new RateLimiter({ db, clock });
      const reset = T0 / 1_000_000 + 60;
      expect(await limiter.hit('mgmt:a', 2)).toEqual({
        allowed: true,
        limit: 2,
        remaining: 1,
        resetAt: reset,
        retryAfterSeconds: 45,
      });
      expect(await limiter.hit('mgmt:a', 2)).toMatchObject({ allowed: true, remaining: 0 });
      expect(await limiter.hit('mgmt:a', 2)).toMatchObject({
        allowed: false,
        remaining: 0,
        retryAfterSeconds: 45,
      });
      expect(await limiter.hit('mgmt:b', 2)).toMatchObject({ allowed: true, remaining: 1 });
      clock.advanceMs(45_000);
      expect(await limiter.hit('mgmt:a', 2)).toMatchObject({
        allowed: true,
        remaining: 1,
        resetAt: reset + 60,
      });
    });

    it('takes a longer window', async () => {
      const clock = new ManualClock(T0);
      const limiter = new RateLimiter({ db, clock });
      expect(await limiter.hit('auth', 1, 600)).toMatchObject({ allowed: true, retryAfterSeconds: 600 });
      clock.advanceMs(599_000);
      expect(await limiter.hit('auth', 1, 600)).toMatchObject({ allowed: false, retryAfterSeconds: 1 });
    });

    it('shares the count between two processes on one database', async () => {
      const clock = new ManualClock(T0);
      const again = await openAgain();
      const one = new RateLimiter({ db, clock });
      const two = new RateLimiter({ db: again.db, clock });
      const results = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => (i % 2 ? one : two).hit('shared', 4)));
      expect(results.map((r) => r.remaining).sort()).toEqual([0, 0, 0, 1, 2, 3]);
      expect(results.filter((r) => r.allowed)).toHaveLength(4);
    });

    it('prunes windows older than a day', async () => {
      const clock = new ManualClock(T0);
      const limiter = new RateLimiter({ db, clock });
      await limiter.hit('old', 5);
      clock.advanceMs(24 * 3600 * 1000 + 61_000);
      await limiter.hit('new', 5);
      await limiter.prune();
      const rows = await db.selectFrom('rate_limit_counters').select('bucket').execute();
      expect(rows).toEqual([{ bucket: 'new' }]);
    });
  });

  describe('IdempotencyStore', () => {
    it('claims a key, reports it in progress, replays it once complete, and conflicts on another request', async () => {
      const clock = new ManualClock(T0);
      const store = new IdempotencyStore({ db, clock });
      expect(await store.begin('account:a', 'k1', 'print-1')).toEqual({ kind: 'new' });
      expect(await store.begin('account:a', 'k1', 'print-1')).toEqual({ kind: 'in_progress' });
      await store.complete('account:a', 'k1', 201, { id: 'site_1', nested: [1, 'two'] });
      expect(await store.begin('account:a', 'k1', 'print-1')).toEqual({
        kind: 'replay',
        status: 201,
        body: { id: 'site_1', nested: [1, 'two'] },
      });
      expect(await store.begin('account:a', 'k1', 'print-2')).toEqual({ kind: 'conflict' });
      expect(await store.begin('account:b', 'k1', 'print-2')).toEqual({ kind: 'new' });
    });

    it('replays a body-less answer', async () => {
      const store = new IdempotencyStore({ db, clock: new ManualClock(T0) });
      await store.begin('s', 'k', 'p');
      await store.complete('s', 'k', 204, undefined);
      expect(await store.begin('s', 'k', 'p')).toEqual({ kind: 'replay', status: 204, body: null });
    });

    it('frees a released key, and an expired one after 24 hours', async () => {
      const clock = new ManualClock(T0);
      const store = new IdempotencyStore({ db, clock });
      await store.begin('s', 'k', 'p');
      await store.release('s', 'k');
      expect(await store.begin('s', 'k', 'other')).toEqual({ kind: 'new' });
      await store.complete('s', 'k', 200, {});
      clock.advanceMs(24 * 3600 * 1000);
      expect(await store.begin('s', 'k', 'third')).toEqual({ kind: 'new' });
    });

    it('lets exactly one of two processes claim a key at once', async () => {
      const clock = new ManualClock(T0);
      const again = await openAgain();
      const results = await Promise.all([
        new IdempotencyStore({ db, clock }).begin('s', 'race', 'p'),
        new IdempotencyStore({ db: again.db, clock }).begin('s', 'race', 'p'),
      ]);
      expect(results.map((r) => r.kind).sort()).toEqual(['in_progress', 'new']);
    });

    it('prunes expired keys', async () => {
      const clock = new ManualClock(T0);
      const store = new IdempotencyStore({ db, clock });
      await store.begin('s', 'old', 'p');
      clock.advanceMs(12 * 3600 * 1000);
      await store.begin('s', 'young', 'p');
      clock.advanceMs(12 * 3600 * 1000 + 1);
      await store.prune();
      expect(await db.selectFrom('idempotency_keys').select('key').execute()).toEqual([{ key: 'young' }]);
    });
  });

  describe('JobQueue', () => {
    function queueOn(
      on: Database,
      clock: ManualClock,
      handlers: Record<string, JobHandler>,
      claimMs?: number,
    ) {
      const { log, lines } = capturedLogger();
      const queue = new JobQueue({ database: on, clock, log, claimMs });
      for (const [kind, handler] of Object.entries(handlers)) queue.register(kind, handler);
      return { queue, lines };
    }

    const jobRow = (id: string) =>
      db.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

    it('runs a due job once with its payload and marks it done', async () => {
      const clock = new ManualClock(T0);
      const seen: unknown[] = [];
      const { queue } = queueOn(database, clock, {
        mail: { run: async (payload) => void seen.push(payload) },
      });
      const id = await queue.enqueue(db, 'mail', { to: 'a@example.com', n: 1 });
      await queue.drain();
      await queue.drain();
      expect(seen).toEqual([{ to: 'a@example.com', n: 1 }]);
      expect(await jobRow(id)).toMatchObject({
        attempts: 1,
        done_at: T0,
        failed_at: null,
        locked_until: null,
      });
    });

    it('waits for run_at, and claims only the kinds it has handlers for', async () => {
      const clock = new ManualClock(T0);
      const seen: string[] = [];
      const { queue } = queueOn(database, clock, { later: { run: async () => void seen.push('later') } });
      const later = await queue.enqueue(db, 'later', {}, T0 + MINUTE);
      const unknown = await queue.enqueue(db, 'someone-else', {});
      await queue.drain();
      expect(seen).toEqual([]);
      clock.advanceMs(60_000);
      await queue.drain();
      expect(seen).toEqual(['later']);
      expect((await jobRow(later)).done_at).toBe(T0 + MINUTE);
      expect(await jobRow(unknown)).toMatchObject({ attempts: 0, done_at: null, locked_until: null });
    });

    it('enqueues inside the transaction of the change: a rolled-back change leaves no job', async () => {
      const clock = new ManualClock(T0);
      const { queue } = queueOn(database, clock, {});
      await failure(
        db.transaction().execute(async (trx) => {
          await queue.enqueue(trx, 'mail', {});
          throw new Error('rolled back');
        }),
      );
      expect(await db.selectFrom('jobs').selectAll().execute()).toEqual([]);
    });

    it('retries a failing job with growing delays and gives up after maxAttempts', async () => {
      const clock = new ManualClock(T0);
      let runs = 0;
      const { queue, lines } = queueOn(database, clock, {
        flaky: {
          maxAttempts: 3,
          run: async () => {
            runs++;
            throw new Error(`failure ${runs}`);
          },
        },
      });
      const id = await queue.enqueue(db, 'flaky', {});
      await queue.drain();
      expect(await jobRow(id)).toMatchObject({
        attempts: 1,
        run_at: T0 + 2_000_000,
        last_error: 'failure 1',
      });
      await queue.drain(); // not due yet
      expect(runs).toBe(1);
      clock.advanceMs(2000);
      await queue.drain();
      expect(await jobRow(id)).toMatchObject({
        attempts: 2,
        run_at: T0 + 6_000_000,
        last_error: 'failure 2',
      });
      clock.advanceMs(4000);
      await queue.drain();
      expect(await jobRow(id)).toMatchObject({ attempts: 3, failed_at: T0 + 6_000_000, done_at: null });
      clock.advanceMs(3600 * 1000);
      await queue.drain();
      expect(runs).toBe(3);
      expect(lines.filter((l) => l.msg === 'job failed; will retry')).toHaveLength(2);
      expect(lines.filter((l) => l.msg === 'job failed for good')).toHaveLength(1);
    });

    it('uses the handler’s own retry delay', async () => {
      const clock = new ManualClock(T0);
      const { queue } = queueOn(database, clock, {
        custom: {
          retryDelayMs: (attempts) => attempts * 10_000,
          run: async () => {
            throw new Error('no');
          },
        },
      });
      const id = await queue.enqueue(db, 'custom', {});
      await queue.drain();
      expect((await jobRow(id)).run_at).toBe(T0 + 10_000_000);
    });

    it('gives up, without running it, a job whose every attempt ended with its process; its handler records it', async () => {
      const clock = new ManualClock(T0);
      const runs: string[] = [];
      let recording: 'fails' | 'works' = 'fails';
      const { queue, lines } = queueOn(database, clock, {
        render: {
          maxAttempts: 2,
          lockMs: 30_000,
          run: async () => void runs.push('run'),
          abandoned: async (payload) => {
            runs.push(`abandoned ${(payload as { n: number }).n} ${recording}`);
            if (recording === 'fails') throw new Error('database away');
          },
        },
      });
      const id = await queue.enqueue(db, 'render', { n: 7 });
      // Two claims, each left as a process leaves it when it dies during the run: never finished.
      await db.updateTable('jobs').set({ attempts: 2, locked_until: T0 }).where('id', '=', id).execute();
      clock.advanceMs(1);
      await queue.drain();
      // The handler could not record it: the job is not run, and is given up again later.
      expect(runs).toEqual(['abandoned 7 fails']);
      expect(await jobRow(id)).toMatchObject({ failed_at: null, done_at: null, locked_until: null });
      recording = 'works';
      clock.advanceMs(3_600_000);
      await queue.drain();
      expect(runs).toEqual(['abandoned 7 fails', 'abandoned 7 works']);
      expect(await jobRow(id)).toMatchObject({
        attempts: 4,
        done_at: null,
        failed_at: T0 + 3_600_001_000,
        last_error: 'given up: the process ended during each of its 2 attempts',
      });
      clock.advanceMs(3_600_000);
      await queue.drain();
      expect(runs).toHaveLength(2);
      expect(
        lines.filter((l) => l.msg === 'job given up: the process ended during each of its 2 attempts'),
      ).toHaveLength(1);
    });

    it('stops retrying past retryForMs after the job was queued, however few its attempts', async () => {
      const clock = new ManualClock(T0);
      let runs = 0;
      const { queue } = queueOn(database, clock, {
        outbound: {
          maxAttempts: 1_000,
          retryForMs: 10_000,
          retryDelayMs: () => 4_000,
          run: async () => {
            runs++;
            throw new Error('mail server away');
          },
        },
      });
      const id = await queue.enqueue(db, 'outbound', {});
      for (let i = 0; i < 3; i++) {
        await queue.drain();
        clock.advanceMs(4_000);
      }
      await queue.drain();
      // Tried at 0, 4 and 8 s; a fourth try would be at 12 s, past the 10 s.
      expect(runs).toBe(3);
      expect(await jobRow(id)).toMatchObject({ attempts: 3, failed_at: T0 + 8_000_000 });
    });

    it('delivers an alarm mail after an hour of mail server outage, and never a sign-in mail past its send_by', async () => {
      const clock = new ManualClock(T0);
      const sent: string[] = [];
      let serverUp = false;
      const mailer = {
        send: async (mail: { subject: string }) => {
          if (!serverUp) throw new Error('connect ECONNREFUSED 127.0.0.1:25');
          sent.push(mail.subject);
        },
      } as unknown as Mailer;
      const { log } = capturedLogger();
      const { queue } = queueOn(database, clock, { mail: mailJobHandler(mailer, clock, log) });
      const alarm = await queue.enqueue(db, 'mail', { to: 'a@example.com', subject: 'Alarm', text: '' });
      const code = await queue.enqueue(db, 'mail', {
        to: 'a@example.com',
        subject: 'Your sign-in code',
        text: '',
        send_by: T0 + 600_000_000,
      });
      while (clock.nowMicros() < T0 + 3_600_000_000) {
        await queue.drain();
        clock.advanceMs(10_000);
      }
      serverUp = true;
      clock.advanceMs(600_000);
      await queue.drain();
      expect(sent).toEqual(['Alarm']);
      expect(await jobRow(alarm)).toMatchObject({ failed_at: null, done_at: expect.any(Number) });
      expect(await jobRow(code)).toMatchObject({ failed_at: null, done_at: expect.any(Number) });
    });

    it('claims due jobs of a lower priority class first, each class oldest first', async () => {
      const clock = new ManualClock(T0);
      const order: string[] = [];
      const run: JobHandler['run'] = async (payload) => void order.push((payload as { n: string }).n);
      const { queue } = queueOn(database, clock, {
        webhook: { priority: 1, run },
        mail: { run },
      });
      await queue.enqueue(db, 'webhook', { n: 'webhook 1' }, T0 - 20_000_000);
      await queue.enqueue(db, 'webhook', { n: 'webhook 2' }, T0 - 10_000_000);
      await queue.enqueue(db, 'mail', { n: 'mail 2' }, T0);
      await queue.enqueue(db, 'mail', { n: 'mail 1' }, T0 - 1_000_000);
      await queue.drain();
      expect(order).toEqual(['mail 1', 'mail 2', 'webhook 1', 'webhook 2']);
    });

    it('runs each job exactly once when two processes drain one database at the same time', async () => {
      const clock = new ManualClock(T0);
      const again = await openAgain();
      const runs: string[] = [];
      const handler: JobHandler = {
        run: async (payload) => {
          runs.push(`${(payload as { n: number }).n}`);
          await new Promise((resolve) => setImmediate(resolve)); // let the other process claim meanwhile
        },
      };
      const one = queueOn(database, clock, { work: handler });
      const two = queueOn(again, clock, { work: handler });
      const ids: string[] = [];
      for (let n = 0; n < 20; n++) ids.push(await one.queue.enqueue(db, 'work', { n }));
      await Promise.all([one.queue.drain(), two.queue.drain(), one.queue.drain(), two.queue.drain()]);
      expect(runs.map(Number).sort((a, b) => a - b)).toEqual([...Array(20).keys()]);
      const rows = await db.selectFrom('jobs').select(['attempts', 'done_at']).execute();
      expect(rows.every((r) => r.attempts === 1 && r.done_at === T0)).toBe(true);
      // neither process saw an error while claiming
      expect([...one.lines, ...two.lines].filter((l) => (l.level as number) >= 40)).toEqual([]);
    });

    it('keeps a running job claimed, and gives the job of a claimant that died to another process once its claim lapses', async () => {
      const clock = new ManualClock(T0);
      const again = await openAgain();
      const runs: string[] = [];
      let release: () => void = () => undefined;
      let started: () => void = () => undefined;
      const running = new Promise<void>((resolve) => (started = resolve));
      const one = queueOn(
        database,
        clock,
        {
          work: {
            run: async () => {
              runs.push('one');
              started();
              await new Promise<void>((resolve) => (release = resolve));
            },
          },
        },
        600,
      );
      const two = queueOn(again, clock, { work: { run: async () => void runs.push('two') } }, 600);
      const id = await one.queue.enqueue(db, 'work', {});
      const drained = one.queue.drain();
      await running;
      expect((await jobRow(id)).locked_until).toBe(T0 + 600_000);
      // Past its first claim, the job is still running: renewed every 200 ms, nobody else takes it.
      clock.advanceMs(1000);
      await eventually(
        async () => (await jobRow(id)).locked_until === T0 + 1_600_000,
        'the running job to renew its claim',
      );
      await two.queue.drain();
      expect(runs).toEqual(['one']);
      release();
      await drained;
      expect(await jobRow(id)).toMatchObject({ attempts: 1, done_at: T0 + 1_000_000 });

      // A claim as a process leaves it when it dies: taken, never renewed.
      const orphan = await one.queue.enqueue(db, 'work', {});
      await db
        .updateTable('jobs')
        .set({ locked_until: T0 + 1_600_000, attempts: 1 })
        .where('id', '=', orphan)
        .execute();
      await two.queue.drain();
      expect(runs).toEqual(['one']);
      clock.advanceMs(601);
      await two.queue.drain();
      expect(runs).toEqual(['one', 'two']);
      expect(await jobRow(orphan)).toMatchObject({ attempts: 2, done_at: T0 + 1_601_000 });
    });

    it('claims each kind for its own lockMs from the start, never past the queue’s claim', async () => {
      const clock = new ManualClock(T0);
      let release: () => void = () => undefined;
      let running = 0;
      const run: JobHandler['run'] = () =>
        new Promise<void>((resolve) => {
          running++;
          release = resolve;
        });
      const { queue } = queueOn(
        database,
        clock,
        { short: { lockMs: 30_000, run }, long: { lockMs: 900_000, run }, plain: { run } },
        600_000,
      );
      // Each claim as the claim itself writes it, before any renewal: a process that dies now leaves
      // the job to others after its own kind's claim.
      for (const [kind, until] of [
        ['short', T0 + 30_000_000],
        ['long', T0 + 600_000_000],
        ['plain', T0 + 600_000_000],
      ] as const) {
        const id = await queue.enqueue(db, kind, {});
        const drained = queue.drain();
        const before = running;
        await eventually(() => running > before, `the ${kind} job to be running`);
        expect((await jobRow(id)).locked_until).toBe(until);
        release();
        await drained;
      }
    });
  });
});
