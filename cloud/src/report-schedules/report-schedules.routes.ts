import { z } from 'zod';
import { param, userOf } from '../http/context.ts';
import { pageQuerySchema, pageRequest, toPage, byCreation } from '../http/pagination.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput, siteOfBodyFirst } from '../http/validate.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';
import { MAX_RECIPIENTS, scheduleView, type ReportSchedules } from './report-schedules.service.ts';
import { SCHEDULE_EVERY } from './schedule-periods.ts';

/**
 * Template and language are plain strings here: an unknown one is 422 `unknown_template` /
 * `unknown_language` (the service checks them), not a 400.
 */
const CreateSchedule = z.strictObject({
  site_id: z.string().min(1),
  template: z.string(),
  language: z.string(),
  every: z.enum(SCHEDULE_EVERY),
  recipients: z.array(z.email().max(254)).min(1).max(MAX_RECIPIENTS),
});
const ListSchedules = z.object({ ...pageQuerySchema });

export interface ReportScheduleRoutesDeps {
  reportSchedules: ReportSchedules;
  sites: SitesRepository;
  db: Db;
}

export function reportScheduleRoutes(s: ReportScheduleRoutesDeps): RouteDef[] {
  const { reportSchedules, sites, db } = s;
  return [
    {
      method: 'post',
      path: '/v1/report-schedules',
      auth: 'user',
      summary: 'Schedule a report of a site for every past month or week, mailed as a PDF to the recipients',
      requestBody: CreateSchedule,
      success: { status: 201, description: 'the schedule object' },
      errors: ['site_not_found', 'invalid_request', 'unknown_template', 'unknown_language', 'rate_limited'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        await siteOfBodyFirst(req.body, async (siteId) =>
          Boolean(await sites.find(db, user.accountId, siteId)),
        );
        const body = parseInput(CreateSchedule, req.body, 'body');
        const row = await reportSchedules.create(user, body);
        return {
          status: 201,
          body: scheduleView(row, await reportSchedules.recipientStates(user.accountId, [row])),
        };
      },
    },
    {
      method: 'get',
      path: '/v1/report-schedules',
      auth: 'user',
      summary: 'Report schedules of the account, oldest first',
      query: ListSchedules,
      success: { status: 200, description: 'list envelope of schedule objects' },
      errors: ['invalid_request'],
      handler: async (req) => {
        const q = parseInput(ListSchedules, req.query, 'query');
        const { accountId } = userOf(req.ctx);
        const rows = await reportSchedules.list(accountId, pageRequest(q));
        const states = await reportSchedules.recipientStates(accountId, rows);
        return { status: 200, body: toPage(rows, q.limit, byCreation, (row) => scheduleView(row, states)) };
      },
    },
    {
      method: 'get',
      path: '/v1/report-schedules/:schedule_id',
      auth: 'user',
      summary: 'A report schedule, with its next run',
      success: { status: 200, description: 'the schedule object' },
      errors: ['report_schedule_not_found'],
      handler: async (req) => {
        const { accountId } = userOf(req.ctx);
        const row = await reportSchedules.get(accountId, param(req, 'schedule_id'));
        return {
          status: 200,
          body: scheduleView(row, await reportSchedules.recipientStates(accountId, [row])),
        };
      },
    },
    {
      method: 'delete',
      path: '/v1/report-schedules/:schedule_id',
      auth: 'user',
      summary: 'Delete a report schedule: no more runs, and no mail for a run already under way',
      success: { status: 204, description: 'deleted' },
      errors: ['report_schedule_not_found'],
      handler: async (req) => {
        await reportSchedules.delete(userOf(req.ctx), param(req, 'schedule_id'));
        return { status: 204 };
      },
    },
  ];
}
