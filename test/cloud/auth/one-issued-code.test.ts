import { afterEach, describe, expect, it } from '@jest/globals';
import { sql } from 'kysely';
import { openDatabase } from '../../../cloud/src/storage/database.ts';
import { startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';

/**
 * A new sign-in request invalidates the e-mail's earlier code. Requests at the same moment (a double
 * click) each missed the other's uncommitted code on PostgreSQL and left several codes issued, every
 * link of which worked; two such links opened at once for a new e-mail both created the user, and
 * the second answered 500.
 */
describe.each(DATABASES)('one issued sign-in code per e-mail on %s', (db) => {
  let t: TestCloud;
  afterEach(async () => t?.stop());

  const issued = async (email: string) =>
    (
      await t.cloud.services.db
        .selectFrom('login_codes')
        .select('id')
        .where('email', '=', email)
        .where('state', '=', 'issued')
        .execute()
    ).length;

  it('leaves one code issued after five requests at the same moment, each answered 200', async () => {
    t = await startTestCloud({ db });
    for (const email of ['a@example.com', 'b@example.com', 'c@example.com']) {
      const answers = await Promise.all(
        Array.from({ length: 5 }, () => t.http.post('/v1/auth/request', { email })),
      );
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
      expect(await issued(email)).toBe(1);
    }
  });

  it('keeps only the newest of the codes issued twice before (migration 0019)', async () => {
    t = await startTestCloud({ db });
    await t.http.post('/v1/auth/request', { email: 'a@example.com' });
    const { db: handle } = t.cloud.services;
    await sql`DROP INDEX login_codes_one_issued`.execute(handle);
    await sql`DELETE FROM schema_migrations WHERE name = '0019_one_issued_code'`.execute(handle);
    const [first] = await handle.selectFrom('login_codes').selectAll().execute();
    for (const [id, delta] of [
      ['lc_older', -1],
      ['lc_newer', 1],
    ] as const)
      await handle
        .insertInto('login_codes')
        .values({ ...first!, id, link_hash: `link-${id}`, created_at: first!.created_at + delta })
        .execute();
    expect(await issued('a@example.com')).toBe(3);
    const reopened = await openDatabase(t.database.url, { schema: t.database.schema });
    try {
      const rows = await reopened.db
        .selectFrom('login_codes')
        .select(['id', 'state'])
        .orderBy('created_at')
        .execute();
      expect(rows.map((r) => [r.id, r.state])).toEqual([
        ['lc_older', 'invalidated'],
        [first!.id, 'invalidated'],
        ['lc_newer', 'issued'],
      ]);
    } finally {
      await reopened.close();
    }
  });
});
