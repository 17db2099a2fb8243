import { afterEach, describe, expect, it } from '@jest/globals';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { auditOf, createDevice, createSite } from '../../helpers/fixtures.ts';
import type { Answer as HttpAnswer } from '../../helpers/http.ts';
import { holdInTransaction, type Holder } from '../../helpers/row-locks.ts';

/**
 * A site delete and a write that puts something on the site (a new device, a device created by an
 * integration, a move into it), committed at the same moment on PostgreSQL. Each checked only what it
 * read before the other committed: the delete found the site empty, the write found the site live,
 * and the device ended up in a deleted site. The test holds the account's audit chain head (every
 * such write's last step), so the write is inside its transaction, past its check of the site, when
 * the delete starts; it lets both go once both wait.
 */
// Registered where PostgreSQL is (TEST_DATABASE_URL; CI always sets it). SQLite has one writer.
if (DATABASES.includes('postgres'))
  describe('site delete racing a write onto the site, on PostgreSQL', () => {
    let t: TestCloud;
    let user: SignedIn;
    let holder: Holder | undefined;
    afterEach(async () => {
      await holder?.end();
      holder = undefined;
      await t?.stop();
    });

    async function start(): Promise<{ kitchen: string; cellar: string }> {
      t = await startTestCloud({ db: 'postgres' });
      user = await signUp(t, 'racer@example.com');
      return {
        kitchen: (await createSite(t, user.token, { name: 'Kitchen' })).id,
        cellar: (await createSite(t, user.token, { name: 'Cellar' })).id,
      };
    }

    /** Holds the account's audit chain head in a transaction of the test's own. */
    async function holdAudit(): Promise<Holder> {
      holder = await holdInTransaction(
        t.database,
        'SELECT 1 FROM audit_chain_heads WHERE account_id = $1 FOR UPDATE',
        [user.accountId],
      );
      return holder;
    }

    /** Runs `write` and a delete of `siteId` as described above; answers both answers. */
    async function race(
      siteId: string,
      write: () => Promise<HttpAnswer>,
    ): Promise<{ written: HttpAnswer; deleted: HttpAnswer }> {
      const held = await holdAudit();
      const written = write();
      await held.waitingBehind(1, 'the write to wait behind the audit head');
      const deleted = t.http.delete(`/v1/sites/${siteId}`, { token: user.token });
      await held.waitingBehind(2, 'the delete to wait too');
      await held.commit();
      return { written: await written, deleted: await deleted };
    }

    async function devicesIn(siteId: string): Promise<string[]> {
      const listed = await t.http.get(`/v1/devices?site_id=${siteId}`, { token: user.token });
      expect(listed.status).toBe(200);
      return listed.json.data.map((d: { local_id: string }) => d.local_id);
    }

    it('a device created meanwhile keeps the site', async () => {
      const { cellar } = await start();
      const { written, deleted } = await race(cellar, () =>
        t.http.post(
          '/v1/devices',
          { site_id: cellar, local_id: 'fridge-9', name: 'Fridge', model: 'http-generic' },
          { token: user.token },
        ),
      );
      expect(written.status).toBe(201);
      expect([deleted.status, deleted.json.error.code]).toEqual([409, 'site_not_empty']);
      expect(await devicesIn(cellar)).toEqual(['fridge-9']);
    });

    it('a move into the site meanwhile keeps the site', async () => {
      const { kitchen, cellar } = await start();
      const device = await createDevice(t, user.token, kitchen, { local_id: 'fridge-1' });
      const later = new Date(Date.now() + 3_600_000).toISOString();
      const { written, deleted } = await race(cellar, () =>
        t.http.post(
          `/v1/devices/${device.id}/move`,
          { to_site_id: cellar, effective_at: later },
          { token: user.token },
        ),
      );
      expect(written.status).toBe(200);
      expect([deleted.status, deleted.json.error.code]).toEqual([409, 'site_not_empty']);
      expect((await t.http.get(`/v1/sites/${cellar}`, { token: user.token })).status).toBe(200);
    });

    it('a device an integration creates meanwhile keeps the site', async () => {
      const { cellar } = await start();
      const integration = await t.http.post(
        '/v1/integrations',
        { site_id: cellar, kind: 'shelly', name: 'Hall', model: 'shelly-ht-gen3' },
        { token: user.token },
      );
      expect(integration.status).toBe(201);
      const { written, deleted } = await race(cellar, () =>
        t.http.get(`/v1/ingest/shelly?token=${integration.json.token}&device=hall&temp=21.5`),
      );
      expect(written.status).toBe(200);
      expect([deleted.status, deleted.json.error.code]).toEqual([409, 'site_not_empty']);
      expect(await devicesIn(cellar)).toEqual(['hall']);
    });

    /** Writes that name a site, each answering 404 `site_not_found` once the site is deleted. */
    const writes: [string, (siteId: string) => Promise<HttpAnswer>][] = [
      [
        'a device',
        (siteId) =>
          t.http.post(
            '/v1/devices',
            { site_id: siteId, local_id: 'fridge-9', name: 'Fridge', model: 'http-generic' },
            { token: user.token },
          ),
      ],
      [
        'an integration',
        (siteId) =>
          t.http.post(
            '/v1/integrations',
            { site_id: siteId, kind: 'chirpstack', name: 'LoRaWAN' },
            { token: user.token },
          ),
      ],
      [
        'an MQTT bridge',
        (siteId) => t.http.post('/v1/bridges', { site_id: siteId, name: 'Pi' }, { token: user.token }),
      ],
      [
        'a report schedule',
        (siteId) =>
          t.http.post(
            '/v1/report-schedules',
            {
              site_id: siteId,
              template: 'haccp_monthly',
              language: 'en',
              every: 'month',
              recipients: ['racer@example.com'],
            },
            { token: user.token },
          ),
      ],
      [
        'an alert rule',
        (siteId) =>
          t.http.post(
            '/v1/alert-rules',
            {
              name: 'All fridges',
              site_id: siteId,
              kind: 'temperature',
              conditions: [{ type: 'above', value: 8, severity: 'critical' }],
            },
            { token: user.token },
          ),
      ],
      ['a rename', (siteId) => t.http.patch(`/v1/sites/${siteId}`, { name: 'Store' }, { token: user.token })],
      ['a second delete', (siteId) => t.http.delete(`/v1/sites/${siteId}`, { token: user.token })],
    ];

    it.each(writes)('%s that comes second finds the site gone', async (_, write) => {
      const { cellar } = await start();
      const held = await holdAudit();
      const deleted = t.http.delete(`/v1/sites/${cellar}`, { token: user.token });
      await held.waitingBehind(1, 'the delete to wait behind the audit head');
      const written = write(cellar);
      await held.waitingBehind(2, 'the write to wait too');
      await held.commit();
      expect((await deleted).status).toBe(204);
      const refused = await written;
      expect([refused.status, refused.json.error.code]).toEqual([404, 'site_not_found']);
      // The site's trail ends with its delete: nothing after it, no second delete, no rename.
      expect((await auditOf(t, user.token, 'site.deleted')).length).toBe(1);
      expect(await auditOf(t, user.token, 'site.updated')).toEqual([]);
    });
  });
