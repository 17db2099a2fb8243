import { afterEach, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { auditOf, createSite } from '../../helpers/fixtures.ts';
import { holdInTransaction, type Holder } from '../../helpers/row-locks.ts';

/**
 * Two revokes of one token (or bridge) at the same moment on PostgreSQL: each found it live before
 * the other wrote, so both answered 204 and both audited. The test holds the row, lets both revokes
 * reach their write, and lets them go together: one revokes, the other finds nothing live, 404.
 */
// Registered where PostgreSQL is (TEST_DATABASE_URL; CI always sets it). SQLite has one writer.
if (DATABASES.includes('postgres'))
  describe('concurrent revokes on PostgreSQL', () => {
    let t: TestCloud;
    let user: SignedIn;
    let holder: Holder | undefined;
    afterEach(async () => {
      await holder?.end();
      holder = undefined;
      await t?.stop();
    });

    async function race(table: string, path: string): Promise<number[]> {
      const id = path.split('/').pop()!;
      holder = await holdInTransaction(t.database, `SELECT 1 FROM ${table} WHERE id = $1 FOR UPDATE`, [id]);
      const answers = [
        t.http.delete(path, { token: user.token }),
        t.http.delete(path, { token: user.token }),
      ];
      await holder.waitingBehind(2, 'both revokes to wait for the row');
      await holder.commit();
      return (await Promise.all(answers)).map((a) => a.status).sort();
    }

    it('revokes a token once: one 204 and one 404 token_not_found, one audit entry', async () => {
      t = await startTestCloud({ db: 'postgres' });
      user = await signUp(t, 'racer@example.com');
      const created = await t.http.post(
        '/v1/tokens',
        { label: 'kiosk', scope: 'read' },
        { token: user.token },
      );
      expect(await race('api_tokens', `/v1/tokens/${created.json.id}`)).toEqual([204, 404]);
      expect(await auditOf(t, user.token, 'token.revoked')).toHaveLength(1);
    });

    it('revokes a bridge once: one 204 and one 404 bridge_not_found, one audit entry', async () => {
      t = await startTestCloud({ db: 'postgres' });
      user = await signUp(t, 'racer@example.com');
      const site = await createSite(t, user.token);
      const bridge = await t.http.post('/v1/bridges', { site_id: site.id, name: 'B' }, { token: user.token });
      expect(bridge.status).toBe(201);
      expect(await race('bridges', `/v1/bridges/${bridge.json.id}`)).toEqual([204, 404]);
      expect(await auditOf(t, user.token, 'bridge.revoked')).toHaveLength(1);
    });
  });
