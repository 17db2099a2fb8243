import { z } from 'zod';
import { newId } from '../../../shared/ids.ts';
import { formatSeconds } from '../../../shared/time.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { Conflict, notFound, Unprocessable } from '../errors.ts';
import { param, userOf } from '../http/context.ts';
import { name, timezone } from '../http/inputs.ts';
import { pageQuerySchema, pageRequest, toPage, byCreation } from '../http/pagination.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput } from '../http/validate.ts';
import type { Db } from '../storage/database.ts';
import type { SitesRepository } from './sites.repository.ts';
import { siteView } from './sites.view.ts';
import { isVertical, VERTICALS } from './verticals.ts';

const CreateSite = z.strictObject({ name, vertical: z.string(), timezone: timezone.optional() });
const PatchSite = z.strictObject({ name: name.optional(), timezone: timezone.optional() });
const ListSites = z.object(pageQuerySchema);

/** What these routes use; the composition root passes them in. */
export interface SiteRoutesDeps {
  db: Db;
  clock: Clock;
  sites: SitesRepository;
  audit: AuditRepository;
}

export function siteRoutes(s: SiteRoutesDeps): RouteDef[] {
  const { db, clock, sites, audit } = s;

  async function load(accountId: string, id: string) {
    const site = await sites.find(db, accountId, id);
    if (!site) throw notFound('site');
    return site;
  }

  return [
    {
      method: 'get',
      path: '/v1/sites',
      auth: 'user',
      summary: 'List sites',
      query: ListSites,
      success: { status: 200, description: 'list envelope of sites' },
      handler: async (req) => {
        const q = parseInput(ListSites, req.query, 'query');
        const rows = await sites.list(db, userOf(req.ctx).accountId, pageRequest(q));
        return { status: 200, body: toPage(rows, q.limit, byCreation, siteView) };
      },
    },
    {
      method: 'post',
      path: '/v1/sites',
      auth: 'user',
      summary: 'Create a site',
      requestBody: CreateSite,
      success: { status: 201, description: 'the site' },
      errors: ['unknown_vertical'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        const body = parseInput(CreateSite, req.body, 'body');
        if (!isVertical(body.vertical)) {
          throw new Unprocessable('unknown_vertical', `vertical must be one of ${VERTICALS.join(', ')}`);
        }
        const now = clock.nowMicros();
        const row = {
          id: newId('site'),
          account_id: user.accountId,
          name: body.name,
          vertical: body.vertical,
          timezone: body.timezone ?? 'UTC',
          created_at: now,
          deleted_at: null,
        };
        await db.transaction().execute(async (trx) => {
          await sites.insert(trx, row);
          await audit.record(trx, {
            accountId: user.accountId,
            kind: 'site.created',
            by: user.userId,
            target: row.id,
            details: { name: row.name, vertical: row.vertical },
            ts: now,
          });
        });
        return { status: 201, body: siteView(row) };
      },
    },
    {
      method: 'get',
      path: '/v1/sites/:site_id',
      auth: 'user',
      summary: 'Get a site',
      success: { status: 200, description: 'the site' },
      errors: ['site_not_found'],
      handler: async (req) => ({
        status: 200,
        body: siteView(await load(userOf(req.ctx).accountId, param(req, 'site_id'))),
      }),
    },
    {
      method: 'patch',
      path: '/v1/sites/:site_id',
      auth: 'user',
      summary: 'Rename a site or change its time zone',
      requestBody: PatchSite,
      success: { status: 200, description: 'the updated site' },
      errors: ['site_not_found'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        const site = await load(user.accountId, param(req, 'site_id'));
        const body = parseInput(PatchSite, req.body, 'body');
        const changes = Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined));
        await db.transaction().execute(async (trx) => {
          if (!(await sites.update(trx, site.id, changes))) throw notFound('site');
          await audit.record(trx, {
            accountId: user.accountId,
            kind: 'site.updated',
            by: user.userId,
            target: site.id,
            details: { before: { name: site.name, timezone: site.timezone }, after: changes },
            ts: clock.nowMicros(),
          });
        });
        return { status: 200, body: siteView({ ...site, ...changes }) };
      },
    },
    {
      method: 'delete',
      path: '/v1/sites/:site_id',
      auth: 'user',
      summary: 'Delete an empty site',
      success: { status: 204, description: 'deleted' },
      errors: ['site_not_found', 'site_not_empty'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        const site = await load(user.accountId, param(req, 'site_id'));
        await db.transaction().execute(async (trx) => {
          // The delete's row lock comes first: a device or move committing meanwhile is seen below.
          const now = clock.nowMicros();
          if (!(await sites.delete(trx, site.id, now))) throw notFound('site');
          // Pending moves before devices: the job that applies a move takes no lock on the site, and
          // each check reads what is committed when it starts (PostgreSQL), so a move applied
          // between the two is seen by the second as a device, where the other order saw neither.
          const arrival = await sites.firstPendingArrival(trx, site.id);
          if ((await sites.countLiveDevices(trx, site.id)) > 0) {
            throw new Conflict('site_not_empty', 'the site still has devices; delete or move them first');
          }
          if (arrival !== undefined) {
            throw new Conflict(
              'site_not_empty',
              `a device is scheduled to move to this site (at ${formatSeconds(arrival)}); delete the site once it has moved and left again`,
            );
          }
          await audit.record(trx, {
            accountId: user.accountId,
            kind: 'site.deleted',
            by: user.userId,
            target: site.id,
            details: { name: site.name },
            ts: now,
          });
        });
        return { status: 204 };
      },
    },
  ];
}
