import { afterEach, describe, expect, it } from '@jest/globals';
import { sql } from 'kysely';
import { entryHash } from '../../../cloud/src/audit/audit-chain.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { createDevice, createSite } from '../../helpers/fixtures.ts';

interface ChainRow {
  id: string;
  seq: number;
  ts: number;
  kind: string;
  account_id: string;
  actor: string;
  target: string;
  details: string;
  prev_hash: string | null;
  hash: string;
}

describe.each(DATABASES)('audit hash chain on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  afterEach(async () => t?.stop());

  async function start(): Promise<void> {
    t = await startTestCloud({ db, env: { RATE_LIMIT_MGMT_PER_MIN: '10000' } });
    user = await signUp(t, 'owner@example.com');
  }

  /** The account's chain as stored, in chain order, read behind the service's back. */
  async function chain(accountId = user.accountId): Promise<ChainRow[]> {
    const rows =
      await sql<ChainRow>`SELECT id, seq, ts, kind, account_id, actor, target, details, prev_hash, hash
      FROM audit_log WHERE account_id = ${accountId} AND seq IS NOT NULL ORDER BY seq`.execute(
        t.cloud.services.db,
      );
    return rows.rows.map((r) => ({ ...r, seq: Number(r.seq), ts: Number(r.ts) }));
  }

  const verify = (token = user.token) => t.http.get('/v1/audit/verify', { token });

  /** Audited changes through the API: a site made, renamed and deleted, a device made. */
  async function auditedChanges(): Promise<void> {
    const site = await createSite(t, user.token, { name: 'Cold room' });
    expect(
      (await t.http.patch(`/v1/sites/${site.id}`, { name: 'Cold room 2' }, { token: user.token })).status,
    ).toBe(200);
    const other = await createSite(t, user.token, { name: 'Spare' });
    expect((await t.http.delete(`/v1/sites/${other.id}`, { token: user.token })).status).toBe(204);
    await createDevice(t, user.token, site.id);
  }

  it('links every audited change to the one before it, and verifies', async () => {
    await start();
    await auditedChanges();
    const rows = await chain();
    expect(rows.length).toBeGreaterThanOrEqual(5);
    expect(rows.map((r) => r.seq)).toEqual(rows.map((_, i) => i + 1));
    expect(rows[0]!.prev_hash).toBeNull();
    for (const [i, row] of rows.entries()) {
      expect(row.hash).toMatch(/^[0-9a-f]{64}$/);
      expect(row.hash).toBe(entryHash(row));
      if (i > 0) expect(row.prev_hash).toBe(rows[i - 1]!.hash);
    }
    const answer = await verify();
    expect(answer.status).toBe(200);
    const last = rows[rows.length - 1]!;
    expect(answer.json).toEqual({ ok: true, entries: rows.length, head: { id: last.id, hash: last.hash } });
    // The head the report service prints is the same link.
    expect(await t.cloud.services.audit.chainHead(t.cloud.services.db, user.accountId)).toEqual({
      entryId: last.id,
      hash: last.hash,
      entries: rows.length,
    });
    // The newest entry of the audit list is the chain's head.
    const listed = await t.http.get('/v1/accounts/me/audit?limit=1', { token: user.token });
    expect(listed.json.data[0].id).toBe(last.id);
  });

  it('fails at the entry whose details were edited in the database', async () => {
    await start();
    await auditedChanges();
    const rows = await chain();
    const edited = rows[2]!;
    await sql`UPDATE audit_log SET details = ${'{"name":"Someone else"}'} WHERE id = ${edited.id}`.execute(
      t.cloud.services.db,
    );
    const answer = await verify();
    expect(answer.status).toBe(200);
    expect(answer.json).toEqual({
      ok: false,
      entries_checked: 3,
      first_broken: { id: edited.id, ts: expect.any(String), kind: edited.kind, reason: 'hash_mismatch' },
    });
    expect(answer.json.first_broken.ts).toBe(
      new Date(Math.floor(edited.ts / 1e6) * 1000).toISOString().replace('.000', ''),
    );
  });

  it('fails at the entry after one rewritten with a fresh hash', async () => {
    await start();
    await auditedChanges();
    const rows = await chain();
    const edited = { ...rows[1]!, actor: 'usr_nobody' };
    await sql`UPDATE audit_log SET actor = ${edited.actor}, hash = ${entryHash(edited)} WHERE id = ${edited.id}`.execute(
      t.cloud.services.db,
    );
    const answer = await verify();
    expect(answer.json).toMatchObject({
      ok: false,
      entries_checked: 3,
      first_broken: { id: rows[2]!.id, kind: rows[2]!.kind, reason: 'prev_hash_mismatch' },
    });
  });

  it('detects a deleted middle entry as a gap at the entry after it', async () => {
    await start();
    await auditedChanges();
    const rows = await chain();
    await sql`DELETE FROM audit_log WHERE id = ${rows[3]!.id}`.execute(t.cloud.services.db);
    const answer = await verify();
    expect(answer.json).toMatchObject({
      ok: false,
      entries_checked: 4,
      first_broken: { id: rows[4]!.id, kind: rows[4]!.kind, reason: 'seq_gap' },
    });
  });

  it('detects a deleted newest entry against the chain head', async () => {
    await start();
    await auditedChanges();
    const rows = await chain();
    const last = rows[rows.length - 1]!;
    await sql`DELETE FROM audit_log WHERE id = ${last.id}`.execute(t.cloud.services.db);
    const answer = await verify();
    expect(answer.json).toEqual({
      ok: false,
      entries_checked: rows.length - 1,
      first_broken: { id: last.id, ts: null, kind: null, reason: 'head_mismatch' },
    });
  });

  it('chains concurrent audited requests of one account one after the other', async () => {
    await start();
    const parallel = 40;
    const answers = await Promise.all(
      Array.from({ length: parallel }, (_, i) =>
        t.http.post('/v1/sites', { name: `Site ${i}`, vertical: 'generic' }, { token: user.token }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 201));
    const rows = await chain();
    expect(rows.filter((r) => r.kind === 'site.created')).toHaveLength(parallel);
    const answer = await verify();
    expect(answer.json).toMatchObject({ ok: true, entries: rows.length });
  });

  it('walks a chain longer than one page', async () => {
    await start();
    const { audit, db: database } = t.cloud.services;
    const base = (await chain()).length;
    await database.transaction().execute(async (trx) => {
      for (let i = 0; i < 2100; i++)
        await audit.record(trx, {
          accountId: user.accountId,
          kind: 'site.updated',
          by: user.userId,
          target: `site_${i}`,
          details: { i },
          ts: Date.now() * 1000,
        });
    });
    expect((await verify()).json).toMatchObject({ ok: true, entries: base + 2100 });
    const rows = await chain();
    await sql`UPDATE audit_log SET target = ${'site_x'} WHERE id = ${rows[1500]!.id}`.execute(database);
    expect((await verify()).json).toMatchObject({
      ok: false,
      entries_checked: 1501,
      first_broken: { id: rows[1500]!.id, reason: 'hash_mismatch' },
    });
  });

  it('keeps one chain per account, and needs the admin scope', async () => {
    await start();
    const other = await signUp(t, 'other@example.com');
    await auditedChanges();
    const mine = await chain();
    const theirs = await chain(other.accountId);
    expect(theirs[0]!.prev_hash).toBeNull();
    await sql`UPDATE audit_log SET details = ${'{}'} WHERE id = ${mine[1]!.id}`.execute(t.cloud.services.db);
    expect((await verify()).json.ok).toBe(false);
    expect((await verify(other.token)).json).toEqual({
      ok: true,
      entries: theirs.length,
      head: { id: theirs[theirs.length - 1]!.id, hash: theirs[theirs.length - 1]!.hash },
    });
    const readToken = await t.http.post('/v1/tokens', { label: 'r', scope: 'write' }, { token: user.token });
    const refused = await verify(readToken.json.token);
    expect(refused.status).toBe(403);
    expect(refused.json.error.code).toBe('forbidden');
  });
});
